"""The cipher order fleet's paramiko connections ask for, against paramiko's own SSH server on a
socket pair (the key exchange is real; no network): AES-GCM where the server has it, and whatever
the server has where it has not."""

from __future__ import annotations

import socket
import threading

import paramiko
import pytest

from fleet.transport.sshlink import _aead_first


def _negotiated(server_ciphers: tuple[str, ...] | None) -> str:
    """The cipher a client made by _aead_first agrees on with a paramiko server offering `server_ciphers`."""
    client_sock, server_sock = socket.socketpair()
    server = paramiko.Transport(server_sock)
    server.add_server_key(paramiko.ECDSAKey.generate())
    if server_ciphers is not None:
        server.get_security_options().ciphers = server_ciphers
    started = threading.Event()

    def serve() -> None:
        server.start_server(event=started, server=paramiko.ServerInterface())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = _aead_first(client_sock)
    try:
        client.start_client(timeout=30)
        return client.remote_cipher
    finally:
        client.close()
        server.close()
        thread.join(10)


@pytest.mark.timeout(60)
def test_gcm_is_chosen_where_the_server_offers_it() -> None:
    assert _negotiated(None).endswith("-gcm@openssh.com")  # paramiko's server offers ctr first, GCM too


@pytest.mark.timeout(60)
def test_a_server_without_gcm_still_gets_a_connection() -> None:
    # The client's first choice the server has (RFC 4253 7.1): after GCM, paramiko's own order.
    assert _negotiated(("aes256-ctr", "aes128-ctr")) == "aes128-ctr"
