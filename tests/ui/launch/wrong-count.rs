// `axpy` has four parameters: three arguments are refused.
mod kernels {
    include!(env!("OCC_UI_KERNELS_RS"));
}

use occ::cuda::{CudaSlice, CudaStream, Error, Function};

fn launch(f: &Function, s: &CudaStream, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), Error> {
    let cfg = occ::LaunchConfig::for_elements(x.len(), 256);
    kernels::axpy::launch(f, s, cfg, 2.0, x, y)
}

fn main() {
    let _ = launch;
}
