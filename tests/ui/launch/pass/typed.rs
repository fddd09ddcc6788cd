// The typed launchers of kernels.rs take the kernel's own parameter list:
// `axpy(float a, const float* x, float* y, int n)` and the template
// instance `blur::box<float, 5>(const float*, float*, int)`.
mod kernels {
    include!(env!("OCC_UI_KERNELS_RS"));
}

use occ::cuda::{CudaSlice, CudaStream, CudaView, Error, Function};

#[allow(dead_code)]
fn axpy(f: &Function, s: &CudaStream, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), Error> {
    let cfg = occ::LaunchConfig::for_elements(x.len(), 256);
    kernels::axpy::launch(f, s, cfg, 2.0, x, y, x.len() as i32)
}

#[allow(dead_code)]
fn blur(f: &Function, s: &CudaStream, x: &CudaView<'_, f32>, y: &mut CudaSlice<f32>) -> Result<(), Error> {
    let cfg = occ::LaunchConfig::for_elements(y.len(), 128);
    kernels::blur_box_float_5::launch(f, s, cfg, x, y, y.len() as i32)
}

fn main() {
    // The table knows the parameters by name and C++ type.
    assert_eq!(
        kernels::axpy::KERNEL.signature(),
        "axpy(float a, float const* x, float* y, int n)"
    );
    let names: Vec<&str> = kernels::blur_box_float_5::KERNEL.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["in", "out", "n"]);
}
