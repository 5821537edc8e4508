"""The in-container half of a coding-CLI agent container's network (agent_net.py; standard library only: it runs
as `python -u -c <this file> NET A2A_PORT OUT_PORTS -- AGENT_ARGV...`, the container's command).

The container has no network (`none`: its own loopback only). This relay listens on 127.0.0.1:PORT inside for
each allowed endpoint of this machine (the run's gateway, the model endpoint) and carries each connection over
the unix socket NET/out-PORT.sock, which the host side serves; and it serves NET/a2a.sock, which carries the
host's A2A connections to the agent on 127.0.0.1:A2A_PORT. It starts the agent and exits with it.
"""

import asyncio
import contextlib
import os
import signal
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close passes through: the other direction may still answer
    except (ConnectionError, OSError):
        pass


async def bridge(reader, writer, connect):
    try:
        other_reader, other_writer = await connect()
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(pipe(reader, other_writer), pipe(other_reader, writer))
    finally:
        for w in (writer, other_writer):
            with contextlib.suppress(Exception):
                w.close()


def out_handler(net, port):
    async def handle(reader, writer):
        await bridge(reader, writer, lambda: asyncio.open_unix_connection(f"{net}/out-{port}.sock"))
    return handle


async def main(argv):
    net, a2a_port, outs, sep, command = argv[0], int(argv[1]), argv[2], argv[3], argv[4:]
    if sep != "--" or not command:
        sys.exit("usage: NET A2A_PORT OUT_PORTS -- AGENT_ARGV...")
    os.makedirs(net, exist_ok=True)
    servers = [await asyncio.start_server(out_handler(net, int(port)), "127.0.0.1", int(port))
               for port in outs.split(",") if port]
    a2a_sock = f"{net}/a2a.sock"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(a2a_sock)

    async def to_agent(reader, writer):
        await bridge(reader, writer, lambda: asyncio.open_connection("127.0.0.1", a2a_port))

    servers.append(await asyncio.start_unix_server(to_agent, a2a_sock))
    os.chmod(a2a_sock, 0o666)  # the host side connects as another user under a user namespace
    proc = await asyncio.create_subprocess_exec(*command)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, proc.send_signal, sig)
    code = await proc.wait()
    for server in servers:
        server.close()
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
