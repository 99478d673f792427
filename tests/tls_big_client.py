#!/usr/bin/env python3
"""A TLS 1.2 client for tests/tls_large_live.rs: libssl through ctypes,
because the OpenSSL clients (s_client, curl, Python's ssl module) refuse a
Certificate message over 100 KiB (SSL_CTX_set_max_cert_list's default) and
give no way to raise it. Sends SNI and a client certificate, a GET, reads
the answer to its end, prints the cipher and version.

Usage: tls_big_client.py HOST PORT SNI CERT KEY
"""
import ctypes
import ctypes.util
import socket
import sys

SSL_CTRL_SET_MAX_CERT_LIST = 51  # openssl/ssl.h
SSL_CTRL_SET_TLSEXT_HOSTNAME = 55
TLSEXT_NAMETYPE_HOST_NAME = 0
TLS1_2_VERSION = 0x0303
SSL_CTRL_SET_MAX_PROTO_VERSION = 124
SSL_FILETYPE_PEM = 1


def main():
    host, port, sni, cert, key = sys.argv[1:6]
    lib = ctypes.CDLL(ctypes.util.find_library("ssl") or "libssl.so.3")
    lib.TLS_client_method.restype = ctypes.c_void_p
    lib.SSL_CTX_new.restype = ctypes.c_void_p
    lib.SSL_CTX_new.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    lib.SSL_CTX_use_certificate_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.SSL_CTX_use_PrivateKey_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.SSL_new.restype = ctypes.c_void_p
    lib.SSL_new.argtypes = [ctypes.c_void_p]
    lib.SSL_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    lib.SSL_set_fd.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.SSL_connect.argtypes = [ctypes.c_void_p]
    lib.SSL_write.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.SSL_read.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.SSL_get_error.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.SSL_shutdown.argtypes = [ctypes.c_void_p]
    lib.SSL_get_current_cipher.restype = ctypes.c_void_p
    lib.SSL_get_current_cipher.argtypes = [ctypes.c_void_p]
    lib.SSL_CIPHER_standard_name.restype = ctypes.c_char_p
    lib.SSL_CIPHER_standard_name.argtypes = [ctypes.c_void_p]
    lib.SSL_get_version.restype = ctypes.c_char_p
    lib.SSL_get_version.argtypes = [ctypes.c_void_p]

    ctx = lib.SSL_CTX_new(lib.TLS_client_method())
    assert ctx, "SSL_CTX_new"
    # The protocol's limit: a 24-bit message length.
    lib.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_CERT_LIST, (1 << 24) - 1, None)
    lib.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, TLS1_2_VERSION, None)
    assert lib.SSL_CTX_use_certificate_file(ctx, cert.encode(), SSL_FILETYPE_PEM) == 1, "client cert"
    assert lib.SSL_CTX_use_PrivateKey_file(ctx, key.encode(), SSL_FILETYPE_PEM) == 1, "client key"
    ssl = lib.SSL_new(ctx)
    lib.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_HOST_NAME, ctypes.c_char_p(sni.encode()))
    sock = socket.create_connection((host, int(port)), timeout=60)
    # Blocking from here on (a timeout makes the socket non-blocking, which
    # libssl would answer with WANT_READ).
    sock.settimeout(None)
    lib.SSL_set_fd(ssl, sock.fileno())
    r = lib.SSL_connect(ssl)
    if r != 1:
        sys.exit(f"SSL_connect: {r}, error {lib.SSL_get_error(ssl, r)}")
    req = b"GET / HTTP/1.0\r\n\r\n"
    assert lib.SSL_write(ssl, req, len(req)) == len(req)
    buf = ctypes.create_string_buffer(16384)
    got = 0
    while True:
        n = lib.SSL_read(ssl, buf, len(buf))
        if n <= 0:
            break
        got += n
    lib.SSL_shutdown(ssl)
    sock.close()
    cipher = lib.SSL_CIPHER_standard_name(lib.SSL_get_current_cipher(ssl)).decode()
    print(f"cipher {cipher}")
    print(f"version {lib.SSL_get_version(ssl).decode()}")
    print(f"read {got}")


if __name__ == "__main__":
    main()
