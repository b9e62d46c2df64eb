// Invalid `mlfuse.bytes` (global-bytes.mlir): neither an i8 tensor nor hex text.
// INVALID: global-bytes-invalid.mlir:3:1: error: global @int: mlfuse.bytes must be a tensor of i8 or hex text
"llvm.mlir.global"() <{global_type = !llvm.array<4 x i8>, sym_name = "int", linkage = #llvm.linkage<"internal">, addr_space = 0 : i32, constant, alignment = 64 : i64}> ({
}) {mlfuse.bytes = 5 : i32} : () -> ()

// -----

// INVALID: global-bytes-invalid.mlir:9:1: error: global @text: mlfuse.bytes must be a tensor of i8 or hex text
"llvm.mlir.global"() <{global_type = !llvm.array<4 x i8>, sym_name = "text", linkage = #llvm.linkage<"internal">, addr_space = 0 : i32, constant, alignment = 64 : i64}> ({
}) {mlfuse.bytes = "not hex"} : () -> ()

// -----

// INVALID: global-bytes-invalid.mlir:15:1: error: global @wide: mlfuse.bytes must be a tensor of i8 or hex text
"llvm.mlir.global"() <{global_type = !llvm.array<4 x i8>, sym_name = "wide", linkage = #llvm.linkage<"internal">, addr_space = 0 : i32, constant, alignment = 64 : i64}> ({
}) {mlfuse.bytes = dense<[1, 2]> : tensor<2xi16>} : () -> ()
