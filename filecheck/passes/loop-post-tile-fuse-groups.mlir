// RUN: mlfuse-opt %s --split-input-file -p 'loop-startup-fuse{scope=group},loop-tile{sizes=8,16 fusible-only=true scope=group},loop-post-tile-fuse{scope=group}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-startup-fuse{scope=group},loop-tile{sizes=8,16 fusible-only=true scope=function},loop-post-tile-fuse{scope=function}' | filecheck %s --check-prefix=FUNCTION
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,16 fusible-only=true scope=group remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: not mlfuse-opt %s --split-input-file -p 'loop-tile{scope=everything}' 2>&1 | filecheck %s --check-prefix=INVALID

// Scope "group": the loop passes work inside the planner's window groups (nests tagged
// fusion_group) and keep the ILP's kernel boundaries. Group "g0" is a 2-stage blur
// whose result %bxy is read by group "g1": %bxy is g0's live-out and gets its own tile
// band, with blur_x fused into it; g1's nest reads %bxy whole (it is not fused into g1's
// tiles, and g1 has no producer of its own, so it is not tiled). Untagged nests (a
// stitched kernel) are left alone. In scope "function" the same passes tile only the
// function's result and fuse everything into it.
// CHECK-LABEL: func.func @two_groups
// CHECK: loop.nest "untagged"
// CHECK: loop.band "blur_y.tiles"
// CHECK: loop.nest "blur_x" syms
// CHECK: loop.nest "blur_y" syms
// CHECK: loop.nest "scale" lower [0, 0] upper [32, 32]
// CHECK-NOT: loop.band
// FUNCTION-LABEL: func.func @two_groups
// FUNCTION: loop.band "scale.tiles"
// FUNCTION: loop.nest "blur_x" syms
// FUNCTION: loop.nest "blur_y" syms
// FUNCTION: loop.nest "scale" syms
// INVALID: loop-tile: scope must be one of function, group, got 'everything'
func.func @two_groups(%x: memref<34x34xf32>, %y: memref<32x32xf32>, %z: memref<34x34xf32>) {
  loop.nest "untagged" lower [0, 0] upper [34, 34] iterators ["parallel", "parallel"] ins(%x : memref<34x34xf32>) outs(%z : memref<34x34xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    loop.yield %s : f32
  }
  %bx = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
  loop.nest "blur_x" lower [0, 0] upper [34, 32] iterators ["parallel", "parallel"] ins(%x, %x, %x : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%bx : memref<34x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  %bxy = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
  loop.nest "blur_y" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%bxy : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  loop.nest "scale" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bxy : memref<32x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g1"} {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    loop.yield %s : f32
  }
  memref.dealloc %bxy : memref<32x32xf32>
  memref.dealloc %bx : memref<34x32xf32>
  func.return
}

// -----

// A group's live-out read by a product outside the group, through a view with the
// product's shape (a conv's output as the next 1x1 conv's matrix): the view belongs to
// the reader, and loop.gemm writes only C, so %bxy is tiled like any live-out, blur_x
// fused into its tiles.
// CHECK-LABEL: func.func @read_by_product
// CHECK: loop.band "blur_y.tiles"
// CHECK: loop.nest "blur_x" syms
// CHECK: loop.nest "blur_y" syms
// CHECK: loop.gemm
func.func @read_by_product(%x: memref<34x34xf32>, %w: memref<1x8x32xf32>, %y: memref<1x8x32xf32>) {
  %bx = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
  loop.nest "blur_x" lower [0, 0] upper [34, 32] iterators ["parallel", "parallel"] ins(%x, %x, %x : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%bx : memref<34x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  %bxy = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
  loop.nest "blur_y" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%bxy : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  %m = loop.view %bxy : memref<32x32xf32> to memref<1x32x32xf32>
  loop.gemm %w, %m into %y : memref<1x8x32xf32>, memref<1x32x32xf32>, memref<1x8x32xf32>
  memref.dealloc %bxy : memref<32x32xf32>
  memref.dealloc %bx : memref<34x32xf32>
  func.return
}

// -----

// Not tiled: the live-out's writer stores through a view of another shape (the tile
// would be cut in the buffer's shape, the writes land in the view's).
// CHECK-LABEL: func.func @written_through_a_view
// CHECK-NOT: loop.band
// REMARK: remark: 'blur_y' not tiled: a writer accesses the buffer through a view with another shape
func.func @written_through_a_view(%x: memref<34x34xf32>, %w: memref<1x8x1024xf32>, %y: memref<1x8x1xf32>) {
  %bx = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
  loop.nest "blur_x" lower [0, 0] upper [34, 32] iterators ["parallel", "parallel"] ins(%x, %x, %x : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%bx : memref<34x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  %flat = memref.alloc() {alignment = 64 : i64} : memref<1x1024x1xf32>
  %bxy = loop.view %flat : memref<1x1024x1xf32> to memref<32x32xf32>
  loop.nest "blur_y" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%bxy : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] attributes {fusion_group = "g0"} {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  loop.gemm %w, %flat into %y : memref<1x8x1024xf32>, memref<1x1024x1xf32>, memref<1x8x1xf32>
  memref.dealloc %flat : memref<1x1024x1xf32>
  memref.dealloc %bx : memref<34x32xf32>
  func.return
}
