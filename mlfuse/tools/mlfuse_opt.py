"""mlfuse-opt: xdsl-opt with mlfuse's dialects, passes and targets, and MLIR's spellings.

Differences from xdsl-opt:
- `--pass-pipeline="builtin.module(a,b{k=v})"`, `--mlir-print-ir-after-all` and
  `--mlir-timing` are accepted as in mlir-opt;
- every error (syntax, verifier, bad pass option, failing pass) is printed as
  `file:line:col: error: message` and exits with status 1, never a traceback;
- a pass that fails or crashes leaves a reproducer `.mlir` (the input IR with the
  pipeline in a comment) and prints its path; an unexpected exception anywhere is an
  "internal error" with a reproducer. Reproducers go to --reproducer-dir, or to one
  folder per user in the temp dir that keeps the newest 20 (mlfuse.diagnostics).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from io import StringIO
from typing import NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from mlfuse.diagnostics import (
    Diagnostic,
    check_output_path,
    check_report_paths,
    internal_error,
    parse_located,
    reject_bf16,
    verify_located,
    write_reproducer,
)
from mlfuse.universe import MLFUSE_DIALECTS, MLFUSE_PASSES, MLFUSE_TARGETS


def translate_pass_pipeline(spec: str) -> str:
    """MLIR's `builtin.module(a,b{k=v})` to xDSL's `a,b{k=v}`."""
    spec = spec.strip()
    if spec.startswith("builtin.module(") and spec.endswith(")"):
        spec = spec[len("builtin.module(") : -1]
    elif "(" in spec.split("{")[0]:
        raise Diagnostic(
            f"only module-level pipelines are supported: expected builtin.module(...), got '{spec}'",
            "<pass-pipeline>:1:1",
        )
    return spec


class MlfuseOptMain(xDSLOptMain):
    version_format = "mlfuse-opt built on xdsl {xdsl_version}"

    def __init__(self, args: Sequence[str] | None = None):
        argv = list(sys.argv[1:] if args is None else args)
        self.pipeline_error: Diagnostic | None = None
        super().__init__(description="mlfuse modular optimizer driver", args=argv)
        self.check_target()

    def check_target(self) -> None:
        """Bad -t options are a diagnostic before any input is read, not a traceback at emit."""
        import inspect

        from xdsl.utils.arg_spec import parse_spec

        spec = parse_spec(self.args.target)
        entry = self.available_targets[spec.name]
        if inspect.signature(entry).parameters:
            return
        try:
            entry().from_spec(spec)
        except (ValueError, TypeError) as e:
            raise Diagnostic(f"invalid target '{self.args.target}': {e}", "mlfuse-opt") from None

    # --- registration ----------------------------------------------------------

    def register_all_dialects(self):
        super().register_all_dialects()
        for name, factory in MLFUSE_DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in MLFUSE_PASSES.items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        self.available_targets.update(MLFUSE_TARGETS)

    def register_all_frontends(self):
        super().register_all_frontends()
        self.available_frontends["mlir"] = lambda io: parse_located(
            self.ctx, io.read(), self.get_input_name()
        )
        self.available_frontends["onnx"] = self.import_onnx

    def import_onnx(self, io) -> ModuleOp:
        from mlfuse.frontend.onnx import import_onnx, parse_shape_options

        shapes = parse_shape_options(self.args.shape)
        path = self.args.input_file
        if path and os.path.isfile(path):
            # from the path, so that external data is found next to the model, not in the cwd
            return import_onnx(path, input_shapes=shapes, name=self.get_input_name())
        return import_onnx(io.read(), input_shapes=shapes, name=self.get_input_name())

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.error = command_line_error  # exit status 1 like every other error, not 2
        arg_parser.add_argument(
            "--pass-pipeline",
            type=str,
            default=None,
            help='MLIR-style pipeline, e.g. "builtin.module(canonicalize,cse)"',
        )
        arg_parser.add_argument(
            "--mlir-print-ir-after-all",
            action="store_true",
            help="print the IR after every pass (to stderr, as mlir-opt does)",
        )
        arg_parser.add_argument(
            "--mlir-timing",
            action="store_true",
            help="print a per-pass timing report to stderr",
        )
        arg_parser.add_argument(
            "--reproducer-dir",
            type=str,
            default=None,
            help="where failing-pass reproducers are written (default: mlfuse-reproducers-UID in the temp dir, newest 20 kept)",
        )
        arg_parser.add_argument(
            "--shape",
            action="append",
            default=[],
            metavar="NAME=DIMS",
            help="static shape of an ONNX input with symbolic dimensions, e.g. input_ids=2x128 (repeatable)",
        )
        arg_parser.add_argument(
            "--fusion-report",
            type=str,
            default=None,
            help="write every fusion decision of fusion-plan, with its reason, as JSON",
        )
        arg_parser.add_argument(
            "--fusion-dot",
            type=str,
            default=None,
            help="write the fusion groups chosen by fusion-plan as a Graphviz DOT file",
        )

    # --- pipeline ----------------------------------------------------------------

    def setup_pipeline(self):
        if self.args.pass_pipeline is not None:
            try:
                spec = translate_pass_pipeline(self.args.pass_pipeline)
            except Diagnostic as d:
                self.pipeline_error = d
                spec = ""
            self.args.passes = ",".join(p for p in (self.args.passes, spec) if p)
        self.pass_times: list[tuple[str, float]] = []
        try:
            self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes)
        except (Exception, ArgSpecParseError) as e:  # unknown pass, malformed or ill-typed option
            self.pipeline = PassPipeline(())
            self.pipeline_error = self.pipeline_error or Diagnostic(
                pipeline_error_message(e, self.args.passes), "<pass-pipeline>:1:1"
            )
        if self.args.fusion_report or self.args.fusion_dot:
            self.pipeline = PassPipeline(
                tuple(self.with_report_paths(p) for p in self.pipeline.passes)
            )

    def with_report_paths(self, p: ModulePass) -> ModulePass:
        """Give fusion-plan the report paths named on the command line."""
        import dataclasses

        if p.name != "fusion-plan":
            return p
        return dataclasses.replace(
            p,
            report=self.args.fusion_report or getattr(p, "report", ""),
            dot=self.args.fusion_dot or getattr(p, "dot", ""),
        )

    def apply_passes(self, prog: ModuleOp):
        if any(p.name == "convert-to-llvm" for p in self.pipeline.passes):
            # a CPU pipeline: bf16 is located now, while the graph ops still carry locations
            reject_bf16(prog, "CPU", "<pass convert-to-llvm>")
        for p in self.pipeline.passes:
            start = time.perf_counter()
            try:
                p.apply(self.ctx, prog)
            except Diagnostic:
                raise
            except Exception as e:
                raise PassFailure(p, e) from e
            self.pass_times.append((p.name, time.perf_counter() - start))
            if not self.args.disable_verify:
                verify_located(prog)
            if self.args.mlir_print_ir_after_all or self.args.print_between_passes:
                out = StringIO()
                Printer(stream=out).print_op(prog)
                stream = sys.stderr if self.args.mlir_print_ir_after_all else sys.stdout
                print(f"// -----// IR Dump After {p.name} //----- //", file=stream)
                print(out.getvalue(), file=stream)
                print(file=stream)

    # --- driver ----------------------------------------------------------------------

    def check_paths(self) -> None:
        """Files the run will write are checked before any work (see check_output_path)."""
        check_report_paths(self.pipeline.passes)
        if self.args.output_file:
            check_output_path(self.args.output_file, "the output")
        folder = self.args.reproducer_dir
        if folder and os.path.exists(folder) and not os.path.isdir(folder):
            raise Diagnostic(f"--reproducer-dir '{folder}' is not a directory", "mlfuse-opt")

    def run(self) -> int:
        if self.pipeline_error is not None:
            return self.report(self.pipeline_error)
        try:
            self.check_paths()
        except Diagnostic as d:
            return self.report(d)
        try:
            chunks, file_extension = self.prepare_input()
        except OSError as e:
            return self.report(
                Diagnostic(f"could not open input file: {e.strerror}", e.filename or self.get_input_name())
            )
        except ValueError as e:
            return self.report(Diagnostic(str(e)))
        try:
            output = self.prepare_output()
        except OSError as e:
            return self.report(Diagnostic(f"cannot write the output: {e.strerror or e}", self.args.output_file))
        status = 0
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                try:
                    status = max(status, self.run_chunk(chunk.read(), file_extension, offset, output))
                finally:
                    chunk.close()
        finally:
            if output is not sys.stdout:
                output.close()
        self.print_timing()
        return status

    def run_chunk(self, source: bytes, file_extension: str, offset: int, output) -> int:
        """One input chunk: every failure a Diagnostic; an unexpected one an internal error."""
        try:
            return self.run_chunk_checked(source, file_extension, offset, output)
        except Diagnostic as d:
            return self.report(d)
        except Exception as e:  # a crash outside any pass: parser, verifier, frontend, printer, target
            text = source.decode("utf-8", "replace") if file_extension == "mlir" else None
            header = [f"RUN: mlfuse-opt %s -p '{self.pipeline_spec()}' -t '{self.args.target}'"]
            return self.report(internal_error(e, "mlfuse-opt", text, header, self.args.reproducer_dir))

    def emit(self, module: ModuleOp) -> str:
        """The program in the -t target; a target that fails is reported as such."""
        if self.args.target.split("{")[0] in ("llvm", "llvm-opt"):  # the CPU translation has no bf16
            reject_bf16(module, "LLVM", f"<target {self.args.target}>")
        try:
            return self.output_resulting_program(module)
        except (Diagnostic, OSError):
            raise
        except Exception as e:
            from xdsl.utils.exceptions import DiagnosticException

            if isinstance(e, DiagnosticException):  # e.g. an op the LLVM translation does not know
                raise Diagnostic(f"cannot emit -t {self.args.target}: {str(e).split(chr(10))[0]}", f"<target {self.args.target}>") from None
            raise

    def run_chunk_checked(self, source: bytes, file_extension: str, offset: int, output) -> int:
        expect_diagnostics = self.args.verify_diagnostics or self.args.parsing_diagnostics
        try:
            if file_extension == "mlir":
                if is_blank(source):  # xDSL cannot parse a comment-only chunk
                    source = b"builtin.module {}"
                module = parse_located(self.ctx, source, self.get_input_name(), offset)
            else:
                from io import BytesIO

                module = self.available_frontends[file_extension](BytesIO(source))
            if not self.args.disable_verify:
                verify_located(module)
            self.apply_passes(module)
            output.write(self.emit(module))
            output.flush()
            return 0
        except Diagnostic as d:
            if expect_diagnostics:
                print(d)
                return 0
            return self.report(d)
        except ParseError as e:
            from mlfuse.diagnostics import parse_error_diagnostic

            d = parse_error_diagnostic(e)
            if expect_diagnostics:
                print(d)
                return 0
            return self.report(d)
        except VerifyException as e:
            d = Diagnostic(str(e).split("\n")[0])
            if expect_diagnostics:
                print(d)
                return 0
            return self.report(d)
        except PassFailure as f:
            if expect_diagnostics and isinstance(f.error, Diagnostic | VerifyException):
                print(f)
                return 0
            if file_extension != "mlir":  # the reproducer holds the imported IR, not e.g. ONNX bytes
                from io import BytesIO

                text = StringIO()
                Printer(stream=text).print_op(self.available_frontends[file_extension](BytesIO(source)))
                source = text.getvalue().encode()
            try:
                path = write_reproducer(
                    source.decode("utf-8", "replace"),
                    [f"mlfuse-opt reproducer: failing pass '{f.pass_.name}'", f"RUN: mlfuse-opt %s -p '{self.pipeline_spec()}'"],
                    self.args.reproducer_dir,
                )
                context = f"reproducer written to {path}"
            except Diagnostic as d:
                context = d.message
            return self.report(Diagnostic(str(f), f"<pass {f.pass_.name}>", context))

    def pipeline_spec(self) -> str:
        return ",".join(str(p.pipeline_pass_spec()) for p in self.pipeline.passes)

    def print_timing(self) -> None:
        if not (self.args.mlir_timing or self.args.time_passes) or not self.pass_times:
            return
        total = sum(t for _, t in self.pass_times) or 1e-12
        err = sys.stderr
        print("===" + "-" * 70 + "===", file=err)
        print("  ... Execution time report ...", file=err)
        print("===" + "-" * 70 + "===", file=err)
        print(f"  Total Execution Time: {total:.4f} seconds\n", file=err)
        print("  ----Wall Time----  ----Name----", file=err)
        for name, t in self.pass_times:
            print(f"  {t:8.4f} ({100 * t / total:5.1f}%)  {name}", file=err)
        print(f"  {total:8.4f} (100.0%)  Total", file=err)

    def report(self, d: Diagnostic) -> int:
        if d.location is None and self.args.input_file:  # e.g. a pass's complaint about the whole module
            d.location = self.args.input_file
        return print_diagnostic(d)


class PassFailure(Exception):
    def __init__(self, pass_: ModulePass, error: Exception):
        self.pass_ = pass_
        self.error = error
        from xdsl.utils.exceptions import DiagnosticException

        detail = str(error).split("\n")[0] or type(error).__name__
        prefix = ""
        if not isinstance(error, Diagnostic | DiagnosticException):  # not a pass's own complaint: a crash
            detail = f"{type(error).__name__}: {detail}"
            prefix = "internal error: "
            if os.environ.get("MLFUSE_TRACEBACK"):
                import traceback

                traceback.print_exception(error)
        super().__init__(f"{prefix}pass '{pass_.name}' failed: {detail}")


def is_blank(source: bytes) -> bool:
    lines = source.decode("utf-8", "replace").splitlines()
    return all(not line.strip() or line.strip().startswith("//") for line in lines)


def pipeline_error_message(e: BaseException, spec: str) -> str:
    lines = [line.strip() for line in str(e).split("\n") if line.strip()]
    # xDSL's syntax errors put a heading first and the actual complaint last
    msg = lines[-1] if isinstance(e, ArgSpecParseError) else lines[0]
    return f"invalid pass pipeline '{spec}': {msg}"


def print_diagnostic(d: Diagnostic) -> int:
    """Print `d` to stderr; the exit status of an error."""
    print(d, file=sys.stderr)
    return 1


def command_line_error(message: str) -> NoReturn:
    """argparse's error handler, exiting with status 1 (argparse uses 2)."""
    sys.exit(print_diagnostic(Diagnostic(f"{message} (see mlfuse-opt --help)", "mlfuse-opt")))


def main(args: Sequence[str] | None = None) -> None:
    try:
        tool = MlfuseOptMain(args)
    except Diagnostic as d:
        sys.exit(print_diagnostic(d))
    except ArgSpecParseError as e:  # a malformed -t spec (pipelines are checked in setup_pipeline)
        lines = [line.strip() for line in str(e).split("\n") if line.strip()]
        detail = lines[-1] if lines else str(e)
        sys.exit(print_diagnostic(Diagnostic(f"invalid target: {detail} (quote option values that hold '+' or ',': features=\"+avx2,+fma\")", "mlfuse-opt")))
    except Exception as e:
        sys.exit(print_diagnostic(internal_error(e, "mlfuse-opt")))
    try:
        status = tool.run()
    except Diagnostic as d:
        status = print_diagnostic(d)
    except Exception as e:  # run_chunk reports its own; this is the driver around it
        status = print_diagnostic(internal_error(e, "mlfuse-opt"))
    sys.exit(status)


if __name__ == "__main__":
    main()
