// A max reduction step is maximumf(x, acc) with nsz (scalar.reduction_max_min):
// convert-to-llvm keeps the flag on llvm.maximum's call, the translation keeps it on
// the LLVM call (xDSL's translator alone rejects flags on intrinsic calls), and x86
// does it as vmaxps, which keeps acc's NaN, and a blend on x's own NaN test. A
// maximumf without flags stays llvm.maximum without them.
// RUN: mlfuse-opt %s -p convert-to-llvm | filecheck %s --check-prefix=CALL
// RUN: mlfuse-opt %s -p convert-to-llvm -t llvm | filecheck %s --check-prefix=IR
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm-opt{cpu=znver4}' | filecheck %s --check-prefix=OPT

// CALL-LABEL: llvm.func @step
// CALL: llvm.call_intrinsic "llvm.maximum.f32"(%{{.*}}, %{{.*}}) {fastmathFlags = #llvm.fastmath<nsz>}
// CALL-LABEL: llvm.func @plain
// CALL: llvm.call_intrinsic "llvm.maximum.f32"(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// IR-LABEL: define float @"step"
// IR: call nsz float @"llvm.maximum.f32"
// IR-LABEL: define float @"plain"
// IR: call float @"llvm.maximum.f32"
// OPT-LABEL: define {{.*}} @step
// OPT: call nsz float @llvm.maximum.f32
func.func @step(%x: f32, %acc: f32) -> f32 {
  %m = arith.maximumf %x, %acc fastmath<nsz> : f32
  func.return %m : f32
}

func.func @plain(%x: f32, %acc: f32) -> f32 {
  %m = arith.maximumf %x, %acc : f32
  func.return %m : f32
}
