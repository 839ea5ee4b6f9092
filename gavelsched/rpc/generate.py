"""Generate the gRPC modules beside ``gavelsched.proto`` with grpcio-tools.

``python -m gavelsched.rpc.generate`` rewrites ``gavelsched_pb2.py`` and
``gavelsched_pb2_grpc.py``; ``generated_sources()`` returns what it would write, so a test
can tell when the committed modules are stale. grpcio-tools is a development tool (the
``test`` extra): without it, this says how to get it in one line.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "gavelsched.proto"
OUTPUTS = ("gavelsched_pb2.py", "gavelsched_pb2_grpc.py", "gavelsched_pb2.pyi")


class MissingTool(RuntimeError):
    """grpcio-tools is not installed."""


def generated_sources() -> dict[str, str]:
    """File name -> text that grpcio-tools generates from the proto now."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError:
        raise MissingTool("grpcio-tools is not installed: pip install -e '.[test]' (or "
                          "pip install grpcio-tools)") from None

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    with tempfile.TemporaryDirectory() as out:
        code = protoc.main(["grpc_tools.protoc", f"-I{HERE}", f"-I{include}",
                            f"--python_out={out}", f"--pyi_out={out}",
                            f"--grpc_python_out={out}", str(PROTO)])
        if code != 0:
            raise RuntimeError(f"protoc failed on {PROTO} (exit {code})")
        texts = {name: (Path(out) / name).read_text() for name in OUTPUTS}
    # The generated stub imports its sibling as a top-level module; make it package-relative.
    texts["gavelsched_pb2_grpc.py"] = re.sub(
        r"^import gavelsched_pb2 as", "from . import gavelsched_pb2 as",
        texts["gavelsched_pb2_grpc.py"], flags=re.MULTILINE)
    return texts


def main() -> int:
    try:
        sources = generated_sources()
    except MissingTool as err:
        print(f"python -m gavelsched.rpc.generate: error: {err}", file=sys.stderr)
        return 2
    for name, text in sources.items():
        (HERE / name).write_text(text)
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
