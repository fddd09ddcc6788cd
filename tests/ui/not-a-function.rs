use occ::launch_config;

#[launch_config(kernel = "axpy")]
struct Launch;

fn main() {}
