// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p merge-kernels | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p merge-kernels | filecheck %s --check-prefix=GONE
// RUN: not mlfuse-opt %s -p 'merge-kernels{all=true}' 2>&1 | filecheck %s --check-prefix=BAD

// Twins: the later kernel's calls (func.call and loop.parallel_call) name the first, and
// it is erased; the kernel with another body stays.
// CHECK-LABEL: func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
// CHECK-NEXT: func.call @main__0_exp(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: func.call @main__0_exp(%y, %z) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: func.call @main__2_tanh(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: loop.parallel_call @main__3_rows(%x, %y) range 8
// CHECK-NEXT: loop.parallel_call @main__3_rows(%y, %z) range 8
// CHECK-DAG: func.func private @main__0_exp(
// CHECK-DAG: func.func private @main__2_tanh(
// CHECK-DAG: func.func private @main__3_rows(
// GONE-NOT: @main__1_exp
// GONE-NOT: @main__4_rows
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  func.call @main__0_exp(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @main__1_exp(%y, %z) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @main__2_tanh(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  loop.parallel_call @main__3_rows(%x, %y) range 8 {grain = 1 : i64} : memref<8xf32>, memref<8xf32>
  loop.parallel_call @main__4_rows(%y, %z) range 8 {grain = 1 : i64} : memref<8xf32>, memref<8xf32>
  func.return
}
func.func private @main__3_rows(%lo: i64, %hi: i64, %a: memref<8xf32>, %b: memref<8xf32>) {
  %i = arith.index_cast %lo : i64 to index
  %v = memref.load %a[%i] : memref<8xf32>
  memref.store %v, %b[%i] : memref<8xf32>
  func.return
}
func.func private @main__4_rows(%lo: i64, %hi: i64, %a: memref<8xf32>, %b: memref<8xf32>) {
  %i = arith.index_cast %lo : i64 to index
  %v = memref.load %a[%i] : memref<8xf32>
  memref.store %v, %b[%i] : memref<8xf32>
  func.return
}
func.func private @main__0_exp(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  %e = math.exp %v : f32
  memref.store %e, %b[%c0] : memref<8xf32>
  func.return
}
func.func private @main__1_exp(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  %e = math.exp %v : f32
  memref.store %e, %b[%c0] : memref<8xf32>
  func.return
}
func.func private @main__2_tanh(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  %e = math.tanh %v : f32
  memref.store %e, %b[%c0] : memref<8xf32>
  func.return
}

// -----

// Must not merge: a public function (others may call it by name), bodies that use their
// arguments in another order, and functions of other types.
// CHECK-LABEL: func.func @entry(
// CHECK-NEXT: func.call @public_twin(%x, %y)
// CHECK-NEXT: func.call @swapped(%x, %y)
// CHECK-NEXT: func.call @straight(%x, %y)
// CHECK-NEXT: func.call @wider(%w, %w)
// CHECK-DAG: func.func @public_twin(
// CHECK-DAG: func.func private @swapped(
// CHECK-DAG: func.func private @straight(
// CHECK-DAG: func.func private @wider(
func.func @entry(%x: memref<8xf32>, %y: memref<8xf32>, %w: memref<16xf32>) {
  func.call @public_twin(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @swapped(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @straight(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
  func.call @wider(%w, %w) : (memref<16xf32>, memref<16xf32>) -> ()
  func.return
}
func.func @public_twin(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  memref.store %v, %b[%c0] : memref<8xf32>
  func.return
}
func.func private @swapped(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %b[%c0] : memref<8xf32>
  memref.store %v, %a[%c0] : memref<8xf32>
  func.return
}
func.func private @straight(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<8xf32>
  memref.store %v, %b[%c0] : memref<8xf32>
  func.return
}
func.func private @wider(%a: memref<16xf32>, %b: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<16xf32>
  memref.store %v, %b[%c0] : memref<16xf32>
  func.return
}

// -----

// Must not merge: a declaration has no body to compare.
// CHECK-LABEL: func.func @uses_declared(
// CHECK-NEXT: func.call @declared_a(%x)
// CHECK-NEXT: func.call @declared_b(%x)
func.func @uses_declared(%x: memref<8xf32>) {
  func.call @declared_a(%x) : (memref<8xf32>) -> ()
  func.call @declared_b(%x) : (memref<8xf32>) -> ()
  func.return
}
func.func private @declared_a(memref<8xf32>)
func.func private @declared_b(memref<8xf32>)

// BAD: all
