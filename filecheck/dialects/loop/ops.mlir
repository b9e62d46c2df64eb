// RUN: mlfuse-opt %s | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Iterator and index kinds are enum attributes (#loop<iterator_kind ...>, #loop<index_kind ...>)
// GENERIC: "loop.nest"(%x, %y) <{nest_name = "sum", {{.*}} iterators = [#loop<iterator_kind parallel>, #loop<iterator_kind reduction>],
// GENERIC: "loop.index"() <{kind = #loop<index_kind dim>, position = 0 : i64}> : () -> index

// CHECK-LABEL: func.func @nests
func.func @nests(%x: memref<4x8xf32>, %y: memref<4xf32>, %n: index) {
  // CHECK: loop.nest "sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  // CHECK-NEXT: ^{{.*}}(%{{.*}}: f32, %{{.*}}: f32):
  // CHECK-NEXT: arith.addf
  // CHECK-NEXT: loop.yield %{{.*}} : f32
  loop.nest "sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    loop.yield %s : f32
  }
  // Symbolic bounds: a tile [s0, min(s0 + 2, 4)).
  // CHECK: loop.nest "tile" syms(%{{.*}}) lower [affine_map<()[s0] -> (s0)>] upper [affine_map<()[s0] -> ((s0 + 2), 4)>] iterators ["parallel"] ins() outs(%{{.*}} : memref<4xf32>) maps [affine_map<(d0)[s0] -> (d0)>] attributes {note = "kept"}
  loop.nest "tile" syms(%n) lower [affine_map<()[s0] -> (s0)>] upper [affine_map<()[s0] -> (s0 + 2, 4)>] iterators ["parallel"] ins() outs(%y : memref<4xf32>) maps [affine_map<(d0)[s0] -> (d0)>] attributes {note = "kept"} {
  ^bb0(%o: f32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }
  // CHECK: loop.index dim 0
  // CHECK: loop.index sym 0
  loop.nest "guard" syms(%n) lower [0] upper [4] iterators ["parallel"] ins() outs(%y : memref<4xf32>) maps [affine_map<(d0)[s0] -> (d0)>] {
  ^bb0(%o: f32):
    %i = loop.index dim 0
    %s = loop.index sym 0
    %c = arith.cmpi slt, %i, %s : index
    %one = arith.constant 1.0 : f32
    %r = arith.select %c, %one, %o : f32
    loop.yield %r : f32
  }
  // CHECK: loop.read %{{.*}}[%{{.*}}, %{{.*}}] : f32
  loop.nest "gather" lower [0] upper [4] iterators ["parallel"] ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0) -> (0, 0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%t: f32, %o: f32):
    %i = loop.index dim 0
    %j = arith.constant 7 : index
    %v = loop.read %t[%i, %j] : f32
    loop.yield %v : f32
  }
  // CHECK: %{{.*}} = loop.view %{{.*}} : memref<4x8xf32> to memref<32xf32>
  %v = loop.view %x : memref<4x8xf32> to memref<32xf32>
  // CHECK: %{{.*}}, %{{.*}} = loop.aligned_window %{{.*}}[%{{.*}}, %{{.*}}] {alignment = 64 : i64} : memref<4x8xf32> -> memref<32xf32>
  %skip, %w = loop.aligned_window %x[%n, %n] {alignment = 64 : i64} : memref<4x8xf32> -> memref<32xf32>
  // CHECK: loop.parallel_call @f(%{{.*}}, %{{.*}}) range 4 : i64 {grain = 1 : i64} : memref<4x8xf32>, memref<4xf32>
  loop.parallel_call @f(%x, %y) range 4 {grain = 1 : i64} : memref<4x8xf32>, memref<4xf32>
  func.return
}

// A product over a window's patches: the image stands for B (an implicit im2col).
// A reduction's `init`: the constant each output element's first step reads (one
// entry per output; unit: read the buffer).
// CHECK-LABEL: func.func @nest_init
// CHECK: loop.nest "max" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>] init [0xff800000 : f32, unit] {
func.func @nest_init(%x: memref<4x8xf32>, %y: memref<4xf32>, %z: memref<4xf32>) {
  loop.nest "max" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%x : memref<4x8xf32>) outs(%y, %z : memref<4xf32>, memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>] init [0xFF800000 : f32, unit] {
  ^bb0(%a: f32, %m: f32, %s: f32):
    %n = arith.maximumf %m, %a : f32
    %t = arith.addf %s, %a : f32
    loop.yield %n, %t : f32, f32
  }
  func.return
}

// CHECK-LABEL: func.func @gemm_window
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
// GENERIC: "loop.gemm"(%{{.*}}, %{{.*}}, %{{.*}}) <{window = array<i64: 3, 3>}>
func.func @gemm_window(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x9xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  func.return
}

// ... and at strides (sh, sw) = (2, 2): a 3x3 window over 5x5 gives 2x2 columns.
// CHECK-LABEL: func.func @gemm_window_strided
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3, 2, 2>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x4xf32>
func.func @gemm_window_strided(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x4xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3, 2, 2>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x4xf32>
  func.return
}

// A product into the interiors of padded images: 3x3 rows of the product in 5x5 images.
// CHECK-LABEL: func.func @gemm_frame
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x5x5xf32>
// GENERIC: "loop.gemm"(%{{.*}}, %{{.*}}, %{{.*}}) <{window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3, 3>}>
func.func @gemm_frame(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x5x5xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x5x5xf32>
  func.return
}

// A window over the interior of padded images (a downsample reading a padded input):
// a 1x1 window at stride 2 over the 4x4 interior of 6x6 images gives 2x2 columns.
// A depthwise conv's product: 4 channels, each its own batch, their 5x5 images padded by
// zeros that are not in memory (window_pads: top, left, bottom, right).
// CHECK-LABEL: func.func @gemm_window_pads
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x5x5xf32>, memref<4x1x25xf32>
func.func @gemm_window_pads(%a: memref<4x1x9xf32>, %x: memref<4x1x5x5xf32>, %c: memref<4x1x25xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x5x5xf32>, memref<4x1x25xf32>
  func.return
}

// CHECK-LABEL: func.func @gemm_window_border
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 1, 1, 2, 2>, window_border = array<i64: 1, 1, 1, 1>} : memref<1x4x2xf32>, memref<1x2x6x6xf32>, memref<1x4x4xf32>
func.func @gemm_window_border(%a: memref<1x4x2xf32>, %x: memref<1x2x6x6xf32>, %c: memref<1x4x4xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 1, 1, 2, 2>, window_border = array<i64: 1, 1, 1, 1>} : memref<1x4x2xf32>, memref<1x2x6x6xf32>, memref<1x4x4xf32>
  func.return
}

// A product with an epilogue (a bias per row, then ReLU), and one without operands.
// CHECK-LABEL: func.func @gemm_epilogue
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} epilogue ins(%{{.*}} : memref<4xf32>) {
// CHECK-NEXT: ^{{.*}}(%[[P:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT: arith.addf %[[P]], %[[B]] : f32
// CHECK: loop.yield %{{.*}} : f32
// CHECK-NEXT: } {window = array<i64: 3, 3>, epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
// CHECK: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} epilogue {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: f32):
// GENERIC: "loop.gemm"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{window = array<i64: 3, 3>, epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]}> ({
func.func @gemm_epilogue(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x9xf32>, %bias: memref<4xf32>) {
  loop.gemm %a, %x into %c epilogue ins(%bias : memref<4xf32>) {
  ^bb0(%p: f32, %b: f32):
    %s = arith.addf %p, %b : f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %z : f32
    loop.yield %r : f32
  } {window = array<i64: 3, 3>, epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  loop.gemm %a, %x into %c epilogue {
  ^bb0(%p: f32):
    %n = arith.negf %p : f32
    loop.yield %n : f32
  } {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  func.return
}
