"""A loopback HTTP/1.1 proxy that loses answers: each request is forwarded to
the server and its whole answer read, but for a request that carries
`x-lose-answer: 1` and is a first attempt (`x-stainless-retry-count: 0`),
the client's connection is closed instead of the answer relayed, as a
network that drops a connection after the server acted would. The SDK's
client then retries the same request.

Given several servers, it sends each request to the next one in turn: a
load balancer that keeps no client on one server."""
import socket
import threading


def read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def header(head, name):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip().decode()
    return None


class LossyProxy:
    def __init__(self, *upstream_urls):
        self.upstreams = []
        for url in upstream_urls:
            host, port = url.split("//", 1)[1].split(":")
            self.upstreams.append((host, int(port)))
        self.turn = 0
        self.turn_lock = threading.Lock()
        self.sent = [0] * len(self.upstreams)  # requests sent to each
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.lost = []  # (method, target) of each answer lost
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        buf = b""
        try:
            while True:
                head, buf = read_head(client, buf)
                if head is None:
                    return
                length = int(header(head, b"content-length") or 0)
                while len(buf) < length:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                body, buf = buf[:length], buf[length:]
                lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
                with self.turn_lock:
                    i = self.turn % len(self.upstreams)
                    self.turn += 1
                    self.sent[i] += 1
                upstream = socket.create_connection(self.upstreams[i])
                upstream.sendall(b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body)
                answer = b""
                while True:
                    chunk = upstream.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
                upstream.close()
                first = (header(head, b"x-stainless-retry-count") or "0") == "0"
                if header(head, b"x-lose-answer") == "1" and first:
                    self.lost.append(tuple(head.split(b"\r\n")[0].split(b" ")[:2]))
                    return  # the server acted; the client never hears of it
                # The server's answer closes its connection: tell the client
                # to open a new one too.
                client.sendall(answer)
                return
        except OSError:
            return
        finally:
            client.close()

    def close(self):
        self.listener.close()
