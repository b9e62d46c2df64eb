// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @bad_iterator(%x: memref<4xf32>) {
  // iterator kinds are enum attributes: a value outside them is a parse error at the value
  // CHECK: invalid.mlir:[[# @LINE + 1]]:48: error: 'loop.nest' iterator must be parallel or reduction, got 'window'
  loop.nest "n" lower [0] upper [4] iterators ["window"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @bounds_rank(%x: memref<4xf32>) {
  // CHECK: error: 'loop.nest' has 1 iterators but 2 lower and 2 upper bounds
  loop.nest "n" lower [0, 0] upper [4, 4] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @map_rank(%x: memref<4x4xf32>) {
  // CHECK: error: 'loop.nest' access map 0 (d0) -> (d0) must map 1 dims and 0 symbols to the 2 indices of memref<4x4xf32>
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins() outs(%x : memref<4x4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @parallel_dim_unused(%x: memref<4x4xf32>, %y: memref<4xf32>) {
  // CHECK: error: 'loop.nest' output 0 map (d0, d1) -> (d0) does not use parallel dimension(s) [1]
  loop.nest "n" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%x : memref<4x4xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

func.func @yield_type(%x: memref<4xf32>) {
  // CHECK: error: 'loop.yield' must yield one f32 per output
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %c = arith.constant 1 : i32
    loop.yield %c : i32
  }
  func.return
}

// -----

func.func @block_args(%x: memref<4xf32>) {
  // CHECK: error: 'loop.nest' block arguments (i32) must be the element types of its buffers (f32)
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: i32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }
  func.return
}

// -----

func.func @view_count(%x: memref<4x8xf32>) {
  // CHECK: error: 'loop.view' must keep the element count (memref<4x8xf32> to memref<31xf32>)
  %v = loop.view %x : memref<4x8xf32> to memref<31xf32>
  func.return
}

// -----

func.func @window_indices(%x: memref<4x8xf32>, %i: index) {
  // CHECK: error: 'loop.aligned_window' needs 2 indices into memref<4x8xf32>, got 1
  %skip, %w = loop.aligned_window %x[%i] {alignment = 64 : i64} : memref<4x8xf32> -> memref<32xf32>
  func.return
}

// -----

func.func @window_type(%x: memref<4x8xf32>, %i: index) {
  // CHECK: error: 'loop.aligned_window' of memref<4x8xf32> must be memref<32xf32>, got memref<8xf32>
  %skip, %w = loop.aligned_window %x[%i, %i] {alignment = 64 : i64} : memref<4x8xf32> -> memref<8xf32>
  func.return
}

// -----

func.func @window_alignment(%x: memref<4x8xf64>, %i: index) {
  // CHECK: error: 'loop.aligned_window' alignment must be a power of two of at least the element size (8 bytes), got 4
  %skip, %w = loop.aligned_window %x[%i, %i] {alignment = 4 : i64} : memref<4x8xf64> -> memref<32xf64>
  func.return
}

// -----

func.func @bad_bound(%x: memref<4xf32>) {
  // CHECK: error: expected an integer or an affine map as a loop bound, got "four"
  loop.nest "n" lower [0] upper ["four"] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @index_range(%x: memref<4xf32>) {
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    // CHECK: error: 'loop.index' dim 1 is out of range (1)
    %i = loop.index dim 1
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @index_kind(%x: memref<4xf32>) {
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins() outs(%x : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    // CHECK: invalid.mlir:[[# @LINE + 1]]:21: error: 'loop.index' kind must be dim or sym, got 'row'
    %i = loop.index row 0
    loop.yield %o : f32
  }
  func.return
}

// -----

func.func @gemm_shapes(%a: memref<4x8xf32>, %b: memref<7x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<4x8xf32> x memref<7x3xf32> -> memref<4x3xf32>
  loop.gemm %a, %b into %c : memref<4x8xf32>, memref<7x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_types(%a: memref<4x8xi32>, %b: memref<8x3xi32>, %c: memref<4x3xi32>) {
  // CHECK: error: 'loop.gemm' supports f32 and f64, got i32
  loop.gemm %a, %b into %c : memref<4x8xi32>, memref<8x3xi32>, memref<4x3xi32>
  func.return
}

// -----

func.func @read_of_an_output(%x: memref<4xf32>, %y: memref<4xf32>) {
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %i = loop.index dim 0
    // CHECK: invalid.mlir:[[# @LINE + 1]]:5: error: 'loop.read' source must be the block argument of one of the nest's inputs
    %v = loop.read %o[%i] : f32
    loop.yield %v : f32
  }
  func.return
}

// -----

func.func @read_rank(%x: memref<4x4xf32>, %y: memref<4xf32>) {
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins(%x : memref<4x4xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0) -> (0, 0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %i = loop.index dim 0
    // CHECK: invalid.mlir:[[# @LINE + 1]]:5: error: 'loop.read' of memref<4x4xf32> needs 2 indices, got 1
    %v = loop.read %a[%i] : f32
    loop.yield %v : f32
  }
  func.return
}

// -----

func.func @gemm_window_size(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x9xf32>) {
  // CHECK: error: 'loop.gemm' window must be positive sizes (kh, kw) or sizes and strides (kh, kw, sh, sw), got [3]
  loop.gemm %a, %x into %c {window = array<i64: 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  func.return
}

// -----

func.func @gemm_window_stride(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x4xf32>) {
  // CHECK: error: 'loop.gemm' window must be positive sizes (kh, kw) or sizes and strides (kh, kw, sh, sw), got [3, 3, 0, 2]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3, 0, 2>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x4xf32>
  func.return
}

// -----

// A 3x3 window at stride 2 over 5x5 gives 2x2 columns, not 3x3.
func.func @gemm_window_strided_shapes(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x9xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<1x4x18xf32> x memref<1x2x5x5xf32> -> memref<1x4x9xf32>
  loop.gemm %a, %x into %c {window = array<i64: 3, 3, 2, 2>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  func.return
}

// -----

func.func @gemm_window_image(%a: memref<1x4x18xf32>, %x: memref<1x2x2x5xf32>, %c: memref<1x4x9xf32>) {
  // CHECK: error: 'loop.gemm' window 3x3 needs an image [..., c, h >= 3, w >= 3], got [1, 2, 2, 5]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x2x5xf32>, memref<1x4x9xf32>
  func.return
}

// -----

// A 3x3 window over a 2x5x5 image stands for patches 18 x 9: 16 columns do not multiply.
func.func @gemm_window_shapes(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x16xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<1x4x18xf32> x memref<1x2x5x5xf32> -> memref<1x4x16xf32>
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x16xf32>
  func.return
}

// -----

func.func @gemm_epilogue_maps(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %bias: memref<4xf32>) {
  // CHECK: error: 'loop.gemm' needs one epilogue map per epilogue operand, got 0 for 1
  loop.gemm %a, %b into %c epilogue ins(%bias : memref<4xf32>) {
  ^bb0(%p: f32, %q: f32):
    loop.yield %p : f32
  } : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_epilogue_map_rank(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %bias: memref<4xf32>) {
  // CHECK: error: 'loop.gemm' epilogue map (d0, d1, d2) -> (d1) does not take C's indices to those of memref<4xf32>
  loop.gemm %a, %b into %c epilogue ins(%bias : memref<4xf32>) {
  ^bb0(%p: f32, %q: f32):
    loop.yield %p : f32
  } {epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]} : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_epilogue_args(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' epilogue takes one f32 for the product and one per operand, got (f32, f32)
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f32, %q: f32):
    loop.yield %p : f32
  } : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_epilogue_yield(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' epilogue must yield one f32
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f32):
    loop.yield %p, %p : f32, f32
  } : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_maps_without_epilogue(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' has epilogue operands or maps but no epilogue region
  loop.gemm %a, %b into %c {epilogue_maps = [affine_map<(d0, d1) -> (d1)>]} : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_epilogue_reads_c(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' epilogue operands must not be C's buffer
  loop.gemm %a, %b into %c epilogue ins(%c : memref<4x3xf32>) {
  ^bb0(%p: f32, %q: f32):
    %s = arith.addf %p, %q : f32
    loop.yield %s : f32
  } {epilogue_maps = [affine_map<(d0, d1) -> (d0, d1)>]} : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @init_per_output(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  // CHECK: error: 'loop.nest' init has 2 entries for 1 outputs
  loop.nest "sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] init [0.0 : f32, unit] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

func.func @init_of_another_type(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  // CHECK: error: 'loop.nest' init 0 must be a constant of the output's type f32 or unit, got 0 : i32
  loop.nest "sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] init [0 : i32] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

func.func @gemm_frame_size(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x5x5xf32>) {
  // CHECK: error: 'loop.gemm' c_frame must be (top, left, oh, ow[, channel]), offsets >= 0 and sizes >= 1, got [1, 1, 3]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x5x5xf32>
  func.return
}

// -----

// A 3x3 interior from row 3 on does not fit 5 rows.
func.func @gemm_frame_outside(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x5x5xf32>) {
  // CHECK: error: 'loop.gemm' c_frame [3, 1, 3, 3] needs images [..., m, h >= 6, w >= 4] as C, got [1, 4, 5, 5]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 3, 1, 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x5x5xf32>
  func.return
}

// -----

// Image 3 is the first of the product's 4 rows: C needs 7 images, not 6.
func.func @gemm_frame_channel_outside(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x6x5x5xf32>) {
  // CHECK: error: 'loop.gemm' c_frame channel 3 needs images [1, channels >= 7, h, w] as C, got [1, 6, 5, 5]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3, 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x6x5x5xf32>
  func.return
}

// -----

// A channel offset is for a single batch of images (C's batch stride is the product's rows).
func.func @gemm_frame_channel_batches(%a: memref<2x4x18xf32>, %x: memref<2x2x5x5xf32>, %c: memref<2x6x5x5xf32>) {
  // CHECK: error: 'loop.gemm' c_frame channel 1 needs images [1, channels >= 5, h, w] as C, got [2, 6, 5, 5]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 3, 3, 1>} : memref<2x4x18xf32>, memref<2x2x5x5xf32>, memref<2x6x5x5xf32>
  func.return
}

// -----

// The interiors hold 2x3 = 6 columns of the product, not its 9.
func.func @gemm_frame_columns(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x5x5xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<1x4x18xf32> x memref<1x2x5x5xf32> -> memref<1x4x6xf32>
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 2, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x5x5xf32>
  func.return
}

// -----

func.func @gemm_window_border_without_window(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' window_border must be (top, left, bottom, right) >= 0 with a window, got [1, 1, 1, 1]
  loop.gemm %a, %b into %c {window_border = array<i64: 1, 1, 1, 1>} : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

// The window runs over the 4x4 interior: a 1x1 window at stride 2 gives 2x2 columns, not 3x3.
func.func @gemm_window_border_shapes(%a: memref<1x4x2xf32>, %x: memref<1x2x6x6xf32>, %c: memref<1x4x9xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<1x4x2xf32> x memref<1x2x6x6xf32> -> memref<1x4x9xf32>
  loop.gemm %a, %x into %c {window = array<i64: 1, 1, 2, 2>, window_border = array<i64: 1, 1, 1, 1>} : memref<1x4x2xf32>, memref<1x2x6x6xf32>, memref<1x4x9xf32>
  func.return
}

// -----

// A border of 3 on every side leaves nothing of 6x6 images for the window.
func.func @gemm_window_border_too_wide(%a: memref<1x4x2xf32>, %x: memref<1x2x6x6xf32>, %c: memref<1x4x4xf32>) {
  // CHECK: error: 'loop.gemm' window 1x1 needs an image [..., c, h >= 1, w >= 1], got [1, 2, 0, 0] (the interior within window_border [3, 3, 3, 3])
  loop.gemm %a, %x into %c {window = array<i64: 1, 1, 2, 2>, window_border = array<i64: 3, 3, 3, 3>} : memref<1x4x2xf32>, memref<1x2x6x6xf32>, memref<1x4x4xf32>
  func.return
}

// -----

func.func @gemm_window_pads_without_window(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  // CHECK: error: 'loop.gemm' window_pads must be (top, left, bottom, right) >= 0 with a window, got [1, 1, 1, 1]
  loop.gemm %a, %b into %c {window_pads = array<i64: 1, 1, 1, 1>} : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// -----

func.func @gemm_window_pads_negative(%a: memref<4x1x9xf32>, %x: memref<4x1x5x5xf32>, %c: memref<4x1x25xf32>) {
  // CHECK: error: 'loop.gemm' window_pads must be (top, left, bottom, right) >= 0 with a window, got [1, -1, 1, 1]
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, window_pads = array<i64: 1, -1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x5x5xf32>, memref<4x1x25xf32>
  func.return
}

// -----

// Pads of 1 make 5x5 images 7x7: a 3x3 window gives 5x5 positions, not 7x7.
func.func @gemm_window_pads_shapes(%a: memref<4x1x9xf32>, %x: memref<4x1x5x5xf32>, %c: memref<4x1x49xf32>) {
  // CHECK: error: 'loop.gemm' shapes do not multiply: memref<4x1x9xf32> x memref<4x1x5x5xf32> -> memref<4x1x49xf32>
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x5x5xf32>, memref<4x1x49xf32>
  func.return
}

// -----

// A read in a nest of two blocks: the nest's verifier reports its region (the read does
// not ask a region of two blocks for its one block).
func.func @read_in_two_blocks(%x: memref<4x4xf32>, %y: memref<4xf32>) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loop.nest' op Region 'body' at position 0 expected a single block, but got 2 blocks
  loop.nest "n" lower [0] upper [4] iterators ["parallel"] ins(%x : memref<4x4xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0) -> (0, 0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %i = loop.index dim 0
    %v = loop.read %a[%i, %i] : f32
    loop.yield %v : f32
  ^bb1(%b: f32):
    loop.yield %b : f32
  }
  func.return
}
