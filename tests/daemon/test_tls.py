"""TLS with a self-signed CA made here (``cryptography``): the scheduler serves TLS, clients
and workers verify it with the CA, and a plain-text client gets nowhere (issue #8)."""

from __future__ import annotations

import datetime
import ipaddress

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gavelsched.cli import main
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import Cluster, running
from .fake_worker import FakeWorker


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca_and_server_cert(folder):
    """A CA, and a server certificate it signed for 127.0.0.1 and localhost."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("gavelsched test CA"))
          .issuer_name(_name("gavelsched test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {n: folder / f"{n}.pem" for n in ("ca", "cert", "key")}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(_pem(key))
    return paths


@pytest.fixture
def tls_cluster(tmp_path):
    paths = make_ca_and_server_cert(tmp_path)
    c = Cluster(tmp_path, round_seconds=1.5,
                extra={"tls": {k: str(v) for k, v in paths.items()}})
    c._chan = channel(c.address, ca=paths["ca"])
    c.ca = paths["ca"]
    with running(c):
        yield c


def test_tls_cluster_runs_a_job_and_refuses_plain_text(tls_cluster, capsys):
    c = tls_cluster
    c.fakes.append(FakeWorker(c.address, "v100", ca=c.ca))
    job = c.submit(30)
    done = c.wait_done([job])[job]
    assert done.state == "done" and done.steps_done == 30
    assert main(["status", "--json", "--scheduler", c.address, "--tls-ca", str(c.ca)]) == 0
    assert f'"id": "{job}"' in capsys.readouterr().out
    plain = channel(c.address)
    with pytest.raises(grpc.RpcError) as err:
        pb_grpc.ClientToSchedulerStub(plain).Status(pb.StatusRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    plain.close()
