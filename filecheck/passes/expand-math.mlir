// RUN: mlfuse-opt %s --split-input-file -p expand-math | filecheck %s

// f32 transcendentals become straight-line arith: no math.exp/log/tanh/erf/powf left.
// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.powf
// CHECK: arith.bitcast
// CHECK: func.return
func.func @f32_ops(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32) {
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  %r = math.erf %x : f32
  %p = math.powf %x, %y : f32
  func.return %e, %l, %t, %r, %p : f32, f32, f32, f32, f32
}

// -----

// sin and cos have no expansion: they stay for convert-to-llvm's libm calls.
// CHECK-LABEL: func.func @trig
// CHECK-NEXT: math.sin
// CHECK-NEXT: math.cos
func.func @trig(%x: f32) -> (f32, f32) {
  %s = math.sin %x : f32
  %c = math.cos %x : f32
  func.return %s, %c : f32, f32
}

// -----

// exp: the low clamp by compare and select (x < lo ? lo : x keeps NaN and is one x86 max),
// round x*log2(e) with the 1.5*2^23 trick (+254: both scale factors' exponent bias), cap n at
// 128 by an integer min on k's bits (0x4B40017E: n + 254 = 382) instead of a float clamp,
// a polynomial of contractible multiply-adds (FMA where the target has one), 2^n as two
// factors cut from the capped bits.
// CHECK-LABEL: func.func @exp_shape
// CHECK: %[[LO:.*]] = arith.cmpf olt, %x, %{{.*}} : f32
// CHECK: %[[XC:.*]] = arith.select %[[LO]]
// CHECK-NOT: arith.cmpf
// CHECK: arith.constant 0x4B4000FE : f32
// CHECK: %[[K:.*]] = arith.addf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT: %[[KB:.*]] = arith.bitcast %[[K]] : f32 to i32
// CHECK-NEXT: %[[CAP:.*]] = arith.constant 1262485886 : i32
// CHECK-NEXT: %[[KC:.*]] = arith.minsi %[[KB]], %[[CAP]] : i32
// CHECK: arith.subf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK: arith.subf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK: arith.shrui %[[KC]]
// CHECK: arith.shli
// CHECK: arith.shli
// CHECK: arith.mulf
// CHECK-NEXT: %[[R:.*]] = arith.mulf
// CHECK-NEXT: func.return %[[R]]
func.func @exp_shape(%x: f32) -> f32 {
  %e = math.exp %x : f32
  func.return %e : f32
}

// -----

// No NaN-propagating min/max intrinsics (llvm.minimum/maximum cost fixups on x86) and no
// special-value selects after the clamps: NaN flows through, the scaling overflows to +inf
// and rounds to 0 by itself (erf's only math op left is math.absf, a bit mask). tanh has no
// division by a second polynomial, erf clamps its result.
// CHECK-LABEL: func.func @no_nan_fixups
// CHECK-NOT: arith.maximumf
// CHECK-NOT: arith.minimumf
// CHECK-NOT: arith.maxnumf
// CHECK-NOT: arith.minnumf
// CHECK-NOT: cmpf uno
// CHECK-NOT: math.exp
// CHECK-NOT: math.erf
// CHECK-NOT: math.copysign
// CHECK: func.return
func.func @no_nan_fixups(%x: f32) -> (f32, f32) {
  %e = math.exp %x : f32
  %r = math.erf %x : f32
  func.return %e, %r : f32, f32
}

// -----

// tanh: m / (m + 2) with m = e^(2|x|) - 1 from the same reduction, one division; x's
// sign bit is or-ed in with integer ops (llvm.copysign next to a row max crashed LLVM's
// vectorizer).
// CHECK-LABEL: func.func @tanh_one_division
// CHECK: math.absf
// CHECK: arith.constant 0x4B40007F : f32
// CHECK: arith.divf
// CHECK-NOT: arith.divf
// CHECK: arith.andi
// CHECK: arith.ori
// CHECK-NOT: math.copysign
func.func @tanh_one_division(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}

// -----

// tanh keeps the sign of zero: the result takes x's sign bit last (tanh(-0) = -0).
// CHECK-LABEL: func.func @tanh_sign
// CHECK: %[[XB:.*]] = arith.bitcast %x : f32 to i32
// CHECK: %[[SIGN:.*]] = arith.andi %[[XB]], %{{.*}} : i32
// CHECK: %[[OR:.*]] = arith.ori %{{.*}}, %[[SIGN]] : i32
// CHECK-NEXT: %[[R:.*]] = arith.bitcast %[[OR]] : i32 to f32
// CHECK-NEXT: func.return %[[R]]
func.func @tanh_sign(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}

// -----

// erf: one clamp on each side of the rational, both upper bounds (x^2 <= 16, result <= 1;
// compare and select, NaN kept), |x| times p / q, and x's sign bit or-ed in last
// (erf(-0) = -0; beyond 4, |x| R(16) >= 1 is clamped to 1).
// CHECK-LABEL: func.func @erf_shape
// CHECK: %[[X2:.*]] = arith.mulf %x, %x : f32
// CHECK-NEXT: arith.constant 1.600000e+01 : f32
// CHECK-NEXT: %[[BIG:.*]] = arith.cmpf ogt, %[[X2]]
// CHECK: arith.select %[[BIG]]
// CHECK-NOT: arith.cmpf olt
// CHECK: %[[AX:.*]] = math.absf %x : f32
// CHECK-NEXT: %[[Q:.*]] = arith.divf
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[AX]], %[[Q]] : f32
// CHECK-NEXT: arith.constant 1.000000e+00 : f32
// CHECK-NEXT: arith.cmpf ogt, %[[Y]]
// CHECK-NOT: arith.cmpf
// CHECK: arith.andi
// CHECK: arith.ori
// CHECK-NEXT: %[[R:.*]] = arith.bitcast
// CHECK-NEXT: func.return %[[R]]
func.func @erf_shape(%x: f32) -> f32 {
  %r = math.erf %x : f32
  func.return %r : f32
}

// -----

// pow's special values by selects: the sign bit of x (so -0.0 counts as negative),
// then 1 for y = 0, x = 1, or |x| = 1 with |y| = inf, last.
// CHECK-LABEL: func.func @pow_specials
// CHECK: arith.cmpi slt
// CHECK: arith.ori
// CHECK-NEXT: arith.ori
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %{{.*}}, %[[ONE]], %{{.*}} : f32
// CHECK-NEXT: func.return %[[R]]
func.func @pow_specials(%x: f32, %y: f32) -> f32 {
  %p = math.powf %x, %y : f32
  func.return %p : f32
}

// -----

// Other element types and other math ops are left for the LLVM lowering.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: math.exp %{{.*}} : f64
// CHECK-NEXT: math.sqrt %{{.*}} : f32
func.func @kept(%x: f64, %y: f32) -> (f64, f32) {
  %e = math.exp %x : f64
  %s = math.sqrt %y : f32
  func.return %e, %s : f64, f32
}

// -----

// expand-math takes no options.
// RUN: not mlfuse-opt %s -p 'expand-math{degree=3}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: <pass-pipeline>:1:1: error: invalid pass pipeline 'expand-math{degree=3}'
// CHECK-LABEL: func.func @after_options
func.func @after_options() {
  func.return
}
