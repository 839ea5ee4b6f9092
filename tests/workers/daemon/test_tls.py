"""TLS both ways with a self-signed CA made here: the worker registers with a TLS scheduler,
serves its own RunJob over TLS, and its job's GavelIterator reaches the scheduler through
GAVEL_TLS_CA (thesis §5.6; gavelsched.rpc.security)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest

from gavelsched.rpc import pb
from gavelsched.rpc.security import TlsFiles
from tests.workers.fake_scheduler import FakeJob, FakeScheduler
from workers.daemon.worker import Worker, WorkerConfig

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca_and_cert(directory: Path) -> TlsFiles:
    """A CA, and a certificate it signs for localhost / 127.0.0.1."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gavel test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = TlsFiles(cert=directory / "cert.pem", key=directory / "key.pem",
                     ca=directory / "ca.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_pem_key(key))
    return files


def test_worker_and_iterator_over_tls(tmp_path):
    tls = make_ca_and_cert(tmp_path)
    sched = FakeScheduler(token="tok", tls=tls)
    sched.start()
    token_file = tmp_path / "token"
    token_file.write_text("tok")
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="v100", gpus=1,
                                 work_dir=tmp_path / "w", token="tok",
                                 token_file=str(token_file), tls_ca=str(tls.ca), tls=tls))
    worker.start()
    try:
        assert sched.log.registrations[0].worker_type == "v100"
        sched.jobs["t"] = FakeJob(total_steps=20)
        ack = sched.worker_stub(worker.address, ca=tls.ca).RunJob(pb.RunJobRequest(
            job_id="t", job_type="", workload="steps", total_steps=20, gpus=[0],
            world_size=1, scheduler_address=sched.address,
            lease=pb.Lease(max_steps=20, max_seconds=60)))
        assert ack.ok
        report = sched.wait_for(lambda: next(iter(sched.log.rounds), None))
        assert (report.exit_code, report.failed, report.steps) == (0, False, 20), report.reason
        assert sched.jobs["t"].steps_done == 20       # the iterator's report came over TLS
    finally:
        worker.stop()
        sched.stop()
