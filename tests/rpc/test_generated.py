"""The generated gRPC modules match ``gavelsched.proto`` (regenerate with
``python -m gavelsched.rpc.generate``)."""

import sys
from pathlib import Path

from gavelsched.rpc import generate


def test_generated_modules_are_fresh():
    for name, text in generate.generated_sources().items():
        committed = (generate.HERE / name).read_text()
        assert committed == text, (f"{name} is stale: run `python -m gavelsched.rpc.generate` "
                                   f"after editing {generate.PROTO.name}")


def test_stale_module_is_detected(tmp_path, monkeypatch):
    """The check above can fail: a proto with one more field generates different code."""
    proto = tmp_path / "gavelsched.proto"
    proto.write_text(generate.PROTO.read_text().replace(
        "message Ack {", "message Ack {\n  int32 extra_field_for_test = 99;"))
    monkeypatch.setattr(generate, "PROTO", proto)
    monkeypatch.setattr(generate, "HERE", tmp_path)
    texts = generate.generated_sources()
    assert texts["gavelsched_pb2.py"] != (Path(generate.__file__).parent
                                          / "gavelsched_pb2.py").read_text()


def test_without_grpcio_tools_generate_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "grpc_tools", None)     # as if not installed
    assert generate.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m gavelsched.rpc.generate: error: grpcio-tools is not installed: "
                   "pip install -e '.[test]' (or pip install grpcio-tools)"]
