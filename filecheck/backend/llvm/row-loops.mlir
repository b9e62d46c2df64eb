// Innermost loops of 17 to 300 constant iterations stay loops: convert-to-llvm marks
// their latch branch and the translation gives it `llvm.loop.unroll.disable`, so LLVM's
// loop vectorizer takes the row instead of a full unroll feeding the SLP vectorizer
// (to_llvm.row_loop). Shorter loops, loops around loops and loops of unknown length
// are left to LLVM.
// RUN: mlfuse-opt %s -p convert-to-llvm | filecheck %s --check-prefix=MARK
// RUN: mlfuse-opt %s -p convert-to-llvm -t llvm | filecheck %s --check-prefix=IR
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm-opt{cpu=znver4}' | filecheck %s --check-prefix=OPT

// MARK-LABEL: llvm.func @row28
// MARK: llvm.br ^bb1({{.*}}) {mlfuse.keep_loop}
// MARK-LABEL: llvm.func @row14
// MARK-NOT: mlfuse.keep_loop
// MARK-LABEL: llvm.func @nest
// MARK-COUNT-1: mlfuse.keep_loop
// MARK-NOT: mlfuse.keep_loop
// MARK-LABEL: llvm.func @dynamic
// MARK-NOT: mlfuse.keep_loop
// MARK-LABEL: llvm.func @long
// MARK-LABEL: llvm.func @window_row
// MARK: mlfuse.keep_loop = 4 : i64
// MARK-LABEL: llvm.func @strided
// MARK-NOT: mlfuse.keep_loop
// MARK: {mlfuse.no_vectorize}
// MARK-NOT: mlfuse.keep_loop

// IR-LABEL: define void @"row28"
// IR: br label %{{.*}}, !llvm.loop ![[ID:[0-9]+]]
// IR-LABEL: define void @"row14"
// IR-NOT: !llvm.loop
// IR-LABEL: define void @"nest"
// IR-COUNT-1: !llvm.loop
// IR-LABEL: define void @"dynamic"
// IR-NOT: !llvm.loop
// IR-LABEL: define void @"window_row"
// IR: br label %{{.*}}, !llvm.loop ![[WID:[0-9]+]]
// IR-LABEL: define void @"strided"
// IR: br label %{{.*}}, !llvm.loop ![[SID:[0-9]+]]
// IR: ![[DISABLE:[0-9]+]] = !{ !"llvm.loop.unroll.disable" }
// IR: ![[ID]] = !{ ![[ID]], ![[DISABLE]] }
// IR: ![[COUNT:[0-9]+]] = !{ !"llvm.loop.interleave.count", i32 4 }
// IR: ![[WID]] = !{ ![[WID]], ![[DISABLE]], ![[COUNT]] }
// IR: ![[WIDTH:[0-9]+]] = !{ !"llvm.loop.vectorize.width", i32 1 }
// IR: ![[SID]] = !{ ![[SID]], ![[WIDTH]] }

// The 28-wide row is still a loop after O3: vectorized, not unrolled into 28 scalars.
// OPT-LABEL: define void @row28
// OPT: vector.body:
// OPT: fmul <{{[0-9]+}} x float>
// OPT: br i1 {{.*}}, label %{{.*}}, label %vector.body
// OPT: ret void

func.func @row28(%x: memref<28xf32>, %y: memref<28xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c28 = arith.constant 28 : index
  scf.for %i = %c0 to %c28 step %c1 {
    %v = memref.load %x[%i] : memref<28xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %y[%i] : memref<28xf32>
  }
  func.return
}

func.func @row14(%x: memref<14xf32>, %y: memref<14xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c14 = arith.constant 14 : index
  scf.for %i = %c0 to %c14 step %c1 {
    %v = memref.load %x[%i] : memref<14xf32>
    memref.store %v, %y[%i] : memref<14xf32>
  }
  func.return
}

func.func @nest(%x: memref<28x28xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c28 = arith.constant 28 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c28 step %c1 {
    scf.for %j = %c0 to %c28 step %c1 {
      memref.store %zero, %x[%i, %j] : memref<28x28xf32>
    }
  }
  func.return
}

func.func @dynamic(%x: memref<300xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    memref.store %zero, %x[%i] : memref<300xf32>
  }
  func.return
}

// 301 iterations: beyond what LLVM would unroll fully
func.func @long(%x: memref<301xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c301 = arith.constant 301 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c301 step %c1 {
    memref.store %zero, %x[%i] : memref<301xf32>
  }
  func.return
}

// A window reduction's row (convert-loop-to-scf marks it mlfuse.row_loop): a row loop
// although its taps' loop runs inside, vectorized four vectors side by side
// (to_llvm.WINDOW_ROW_INTERLEAVE): each vector's taps are one chain of dependent FMAs.
func.func @window_row(%x: memref<40xf32>, %w: memref<3xf32>, %y: memref<38xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c38 = arith.constant 38 : index
  scf.for %i = %c0 to %c38 step %c1 {
    scf.for %t = %c0 to %c3 step %c1 {
      %j = arith.addi %i, %t : index
      %v = memref.load %x[%j] : memref<40xf32>
      %k = memref.load %w[%t] : memref<3xf32>
      %acc = memref.load %y[%i] : memref<38xf32>
      %p = arith.mulf %v, %k : f32
      %s = arith.addf %acc, %p : f32
      memref.store %s, %y[%i] : memref<38xf32>
    }
  } {mlfuse.row_loop}
  func.return
}

// A loop around short loops whose index is no last subscript (convert-loop-to-scf marks
// it mlfuse.strided_loop: loop_to_scf.strided_around_short) stays scalar: vectorized
// once LLVM unrolls the rows, its lanes would be a row apart.
func.func @strided(%x: memref<28x28xf32>, %y: memref<28x2x14xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c14 = arith.constant 14 : index
  %c28 = arith.constant 28 : index
  scf.for %r = %c0 to %c28 step %c1 {
    scf.for %t = %c0 to %c14 step %c1 {
      scf.for %e = %c0 to %c2 step %c1 {
        %t2 = arith.muli %t, %c2 : index
        %col = arith.addi %t2, %e : index
        %v = memref.load %x[%r, %col] : memref<28x28xf32>
        memref.store %v, %y[%r, %e, %t] : memref<28x2x14xf32>
      }
    }
  } {mlfuse.strided_loop}
  func.return
}
