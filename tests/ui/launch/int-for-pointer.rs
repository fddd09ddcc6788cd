// `const float* x` takes a device buffer: a u32 is refused.
mod kernels {
    include!(env!("OCC_UI_KERNELS_RS"));
}

use occ::cuda::{CudaSlice, CudaStream, Error, Function};

fn launch(f: &Function, s: &CudaStream, y: &mut CudaSlice<f32>) -> Result<(), Error> {
    let cfg = occ::LaunchConfig::for_elements(y.len(), 256);
    kernels::axpy::launch(f, s, cfg, 2.0, &0u32, y, y.len() as i32)
}

fn main() {
    let _ = launch;
}
