// A constant's bytes ride on its llvm.mlir.global as `mlfuse.bytes` (convert-to-llvm's
// GlobalLowering: an i8 tensor holding the bytes as they are; hex text, as IR printed
// before, is read too) and become the global's initializer in one piece at translation
// (mlfuse/backend/llvm_translate.py). A weight of 100s of MB costs a copy, no text.
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm -t llvm | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm | filecheck %s --check-prefix=LOWERED
// RUN: not mlfuse-opt %S/Inputs/global-bytes-invalid.mlir --split-input-file -t llvm 2>&1 | filecheck %S/Inputs/global-bytes-invalid.mlir --check-prefix=INVALID

// CHECK: @"hex" = internal constant [4 x i8] c"\0A\0B\0C\FF", align 64
// CHECK: @"raw" = internal constant [4 x i8] c"\0A\0B\0C\FF", align 64
"llvm.mlir.global"() <{global_type = !llvm.array<4 x i8>, sym_name = "hex", linkage = #llvm.linkage<"internal">, addr_space = 0 : i32, constant, alignment = 64 : i64}> ({
}) {mlfuse.bytes = "0a0b0cff"} : () -> ()
"llvm.mlir.global"() <{global_type = !llvm.array<4 x i8>, sym_name = "raw", linkage = #llvm.linkage<"internal">, addr_space = 0 : i32, constant, alignment = 64 : i64}> ({
}) {mlfuse.bytes = dense<[10, 11, 12, -1]> : tensor<4xi8>} : () -> ()

// -----

// A memref.global of f32: its little-endian bytes (1.0 = 00 00 80 3F), as they are.
// CHECK: @"w" = internal constant [8 x i8] c"\00\00\80\3F\00\00\00\40", align 64
// LOWERED: llvm.mlir.global internal constant @w() {{.*}}mlfuse.bytes = dense<[0, 0, -128, 63, 0, 0, 0, 64]> : tensor<8xi8>{{.*}} : !llvm.array<8 x i8>
"memref.global"() <{sym_name = "w", type = memref<2xf32>, initial_value = dense<[1.0, 2.0]> : tensor<2xf32>, sym_visibility = "private", constant, alignment = 64 : i64}> : () -> ()
