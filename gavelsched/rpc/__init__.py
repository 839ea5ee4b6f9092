"""gavelsched's gRPC protocol: ``gavelsched.proto`` and the modules grpcio-tools makes from
it (``python -m gavelsched.rpc.generate``). Import the messages and stubs from here:
``from gavelsched.rpc import pb, pb_grpc``."""

from . import gavelsched_pb2 as pb
from . import gavelsched_pb2_grpc as pb_grpc

__all__ = ["pb", "pb_grpc"]
