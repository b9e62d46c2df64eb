// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile-after-fuse{sizes=8,16}' | filecheck %s

// Fuse, then tile (the PPCG/Pluto order, for comparison with post-tiling fusion):
// the pointwise scale merges into blur_y (dependence distance zero), but blur_x
// stays a nest of its own (fusing a stencil needs shifting, which would make the
// tiles depend on each other). Then each nest is tiled on its own; the
// intermediate keeps its full size.
// CHECK-LABEL: func.func @blur
// CHECK-NEXT: %[[BX:.*]] = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
// CHECK-NEXT: loop.band "blur_x.tiles" upper [5, 2] attributes {tile_sizes = array<i64: 8, 16>} {
// CHECK: loop.nest "blur_x" syms(%{{.*}}, %{{.*}}) lower [affine_map<()[s0, s1] -> ((s0 * 8))>, affine_map<()[s0, s1] -> ((s1 * 16))>] upper [affine_map<()[s0, s1] -> (((s0 * 8) + 8), 34)>, affine_map<()[s0, s1] -> (((s1 * 16) + 16))>] {{.*}} outs(%[[BX]] : memref<34x32xf32>)
// CHECK: loop.band "scale.tiles" upper [4, 2] attributes {tile_sizes = array<i64: 8, 16>} {
// CHECK: loop.nest "scale" {{.*}} ins(%[[BX]], %[[BX]], %[[BX]] : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%{{.*}} : memref<32x32xf32>)
// CHECK: arith.addf
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK-NOT: loop.nest
// CHECK: memref.dealloc %[[BX]]
func.func @blur(%x: memref<34x34xf32>, %y: memref<32x32xf32>) {
  %bx = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
  loop.nest "blur_x" lower [0, 0] upper [34, 32] iterators ["parallel", "parallel"] ins(%x, %x, %x : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%bx : memref<34x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  %by = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
  loop.nest "blur_y" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%by : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  memref.dealloc %bx : memref<34x32xf32>
  loop.nest "scale" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%by : memref<32x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 0.111 : f32
    %m = arith.mulf %a, %c : f32
    loop.yield %m : f32
  }
  memref.dealloc %by : memref<32x32xf32>
  func.return
}

// -----

// Invalid options are rejected before anything runs.
// RUN: not mlfuse-opt %s -p 'loop-tile-after-fuse{sizes=-2}' 2>&1 | filecheck %s --check-prefix=NEG
// NEG: error: loop-tile-after-fuse: tile sizes must be >= 0 (0: not tiled), got [-2]
