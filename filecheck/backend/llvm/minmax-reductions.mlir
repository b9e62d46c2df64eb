// An innermost loop that accumulates a maxnum or minnum (through memory or an iteration
// argument) gets `llvm.loop.vectorize.width` of a full vector: LLVM 22's loop vectorizer,
// built with assertions in llvmlite, aborted the process choosing a width for such a
// reduction of some trip counts (105 here). Loops whose maxnum accumulates nothing, and
// strided loops (vectorize.width 1 already), are left alone.
// RUN: mlfuse-opt %s -p convert-to-llvm | filecheck %s --check-prefix=MARK
// RUN: mlfuse-opt %s -p convert-to-llvm -t llvm | filecheck %s --check-prefix=IR
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm-opt{cpu=znver4}' | filecheck %s --check-prefix=OPT

// MARK-LABEL: llvm.func @max105
// MARK: llvm.br ^bb1({{.*}}) {mlfuse.keep_loop, mlfuse.minmax_reduction = 32 : i64}
// MARK-LABEL: llvm.func @min_carried_f64
// MARK: mlfuse.minmax_reduction = 64 : i64
// MARK-LABEL: llvm.func @elementwise_max
// MARK-NOT: mlfuse.minmax_reduction
// MARK-LABEL: llvm.func @sum105
// MARK-NOT: mlfuse.minmax_reduction

// IR-LABEL: define void @"max105"
// IR: br label %{{.*}}, !llvm.loop ![[ID:[0-9]+]]
// IR: ![[WIDTH:[0-9]+]] = !{ !"llvm.loop.vectorize.width", i32 {{(4|8|16)}} }
// IR: ![[ID]] = !{ ![[ID]], ![[DISABLE:[0-9]+]], ![[WIDTH]] }

// The reduction still vectorizes, and LLVM gets through it (no abort).
// OPT-LABEL: define void @max105
// OPT: vector.body:
// OPT: @llvm.maxnum.v{{[0-9]+}}f32
// OPT: ret void

func.func @max105(%x: memref<105xf32>, %acc: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c105 = arith.constant 105 : index
  scf.for %i = %c0 to %c105 step %c1 {
    %v = memref.load %x[%i] : memref<105xf32>
    %a = memref.load %acc[%c0] : memref<1xf32>
    %m = arith.maxnumf %a, %v : f32
    memref.store %m, %acc[%c0] : memref<1xf32>
  }
  func.return
}

func.func @min_carried_f64(%x: memref<127xf64>, %out: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c127 = arith.constant 127 : index
  %init = arith.constant 0x7FF0000000000000 : f64
  %r = scf.for %i = %c0 to %c127 step %c1 iter_args(%a = %init) -> (f64) {
    %v = memref.load %x[%i] : memref<127xf64>
    %m = arith.minnumf %a, %v : f64
    scf.yield %m : f64
  }
  memref.store %r, %out[%c0] : memref<1xf64>
  func.return
}

func.func @elementwise_max(%x: memref<105xf32>, %y: memref<105xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c105 = arith.constant 105 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c105 step %c1 {
    %v = memref.load %x[%i] : memref<105xf32>
    %m = arith.maxnumf %v, %zero : f32
    memref.store %m, %y[%i] : memref<105xf32>
  }
  func.return
}

func.func @sum105(%x: memref<105xf32>, %acc: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c105 = arith.constant 105 : index
  scf.for %i = %c0 to %c105 step %c1 {
    %v = memref.load %x[%i] : memref<105xf32>
    %a = memref.load %acc[%c0] : memref<1xf32>
    %m = arith.addf %a, %v : f32
    memref.store %m, %acc[%c0] : memref<1xf32>
  }
  func.return
}
