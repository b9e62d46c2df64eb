// RUN: mlfuse-opt %s --split-input-file -p assign-buffers | filecheck %s

// Two intermediates live at the same time get disjoint slices; a third, allocated
// after the first is freed, reuses its bytes.
// CHECK: func.func @three(%{{.*}}: memref<64xf32>, %[[ARENA:.*]]: memref<512xi8>) attributes {mlfuse.arena_bytes = 512 : i64}
// CHECK: %[[O0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[A:.*]] = memref.view %[[ARENA]][%[[O0]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[O1:.*]] = arith.constant 256 : index
// CHECK-NEXT: %[[B:.*]] = memref.view %[[ARENA]][%[[O1]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[O2:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[C:.*]] = memref.view %[[ARENA]][%[[O2]]][] : memref<512xi8> to memref<32xf32>
// CHECK-NOT: memref.dealloc
// CHECK-NOT: memref.alloc
func.func @three(%x: memref<64xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  "test.op"(%a, %b) : (memref<64xf32>, memref<64xf32>) -> ()
  memref.dealloc %a : memref<64xf32>
  %c = memref.alloc() {alignment = 64 : i64} : memref<32xf32>
  "test.op"(%b, %c) : (memref<64xf32>, memref<32xf32>) -> ()
  memref.dealloc %b : memref<64xf32>
  memref.dealloc %c : memref<32xf32>
  func.return
}

// -----

// Nothing to assign: the signature is unchanged.
// CHECK-LABEL: func.func @none(%{{.*}}: memref<4xf32>) {
func.func @none(%x: memref<4xf32>) {
  func.return
}

// -----

// Private (outlined) functions are not given arenas.
// CHECK-LABEL: func.func private @helper(%{{.*}}: index) {
// CHECK: memref.alloc
func.func private @helper(%i: index) {
  %a = memref.alloc() : memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  func.return
}

// -----

// RUN: not mlfuse-opt %s -p 'assign-buffers{alignment=32}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: invalid pass pipeline
// CHECK-LABEL: func.func @after
func.func @after() {
  func.return
}
