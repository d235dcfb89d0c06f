"""Runs one hosted agent for Agentry.

The runner starts this file with the agent's private directory as the working directory,
holding the agent's code files. It builds ``agent`` (a uAgents ``Agent`` wired to this Agentry
through its mailbox), runs ``agent.py`` with ``agent`` predefined, then runs the agent.

Environment: AGENTRY_AGENT_SEED, AGENTRY_AGENT_NAME, AGENTRY_AGENT_NETWORK (``testnet`` or
``mainnet``), AGENTRY_URL (the URL the agent registers and is reached by), AGENTRY_AGENT_PORT
(its own server's port, on loopback), AGENTRY_BRIDGE_PORT and
AGENTRY_BRIDGE_SOCKET (set when the sandbox has no network: Agentry is reached through a unix
socket, which this file makes reachable at AGENTRY_URL's address), AGENTRY_PACKAGES (packages
installed from the agent's requirements.txt), and the agent's secrets by name.

File descriptor 3 is a channel to the runner, one JSON object a line: this file asks for the
agent's storage (``{"id": n, "op": "get", "key": ...}``, answered ``{"id": n, "ok": true,
"value": ...}``) and says ``{"op": "ready"}`` once the code is loaded, or ``{"op": "failed",
"reason": ...}`` when it cannot be.

The runner stops an agent with SIGTERM: the agent then ends as uAgents ends on Ctrl+C (its
shutdown handlers run and it tells the Almanac it stopped), whether this file runs it or
agent.py calls ``agent.run()`` itself.

Standard library only: it runs with whatever interpreter the operator chose.
"""

import asyncio
import json
import logging
import os
import runpy
import signal
import socket
import sys
import threading
import traceback
from urllib.parse import urlsplit

CHANNEL_FD = 3


def system_line(text):
    """A line of the agent's log about its running, not from its code."""
    sys.stderr.write(f"[agentry] {text}\n")
    sys.stderr.flush()


class Channel:
    """The line-JSON channel to the runner on fd 3; one request at a time."""

    def __init__(self, fd):
        self._lock = threading.Lock()
        self._next_id = 0
        try:
            self._socket = socket.socket(fileno=fd)
        except OSError:
            self._socket = None
            return
        self._reader = self._socket.makefile("rb")
        self._writer = self._socket.makefile("wb")

    @property
    def open(self):
        return self._socket is not None

    def notify(self, message):
        if self._socket is None:
            return
        with self._lock:
            self._send(message)

    def request(self, op, **fields):
        if self._socket is None:
            raise RuntimeError("agent storage is not available: no channel to the runner")
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            self._send({"id": request_id, "op": op, **fields})
            while True:
                line = self._reader.readline()
                if not line:
                    raise RuntimeError("agent storage is not available: the runner closed the channel")
                answer = json.loads(line)
                if answer.get("id") == request_id:
                    break
        if not answer.get("ok"):
            raise RuntimeError(answer.get("error") or "storage request refused")
        return answer.get("value")

    def _send(self, message):
        self._writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self._writer.flush()


class ChannelStorage:
    """``ctx.storage``: the agent's storage in Agentry (the Hosting API's storage), by key."""

    def __init__(self, channel):
        self._channel = channel

    def get(self, key):
        return self._channel.request("get", key=str(key))

    def has(self, key):
        return bool(self._channel.request("has", key=str(key)))

    def set(self, key, value):
        self._channel.request("set", key=str(key), value=value)

    def remove(self, key):
        self._channel.request("delete", key=str(key))

    def clear(self):
        self._channel.request("clear")

    def keys(self):
        return list(self._channel.request("keys") or [])


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve_bridge(port, socket_path):
    """Forwards each connection to 127.0.0.1:port to the unix socket that reaches Agentry."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)

    def accept():
        while True:
            client, _ = listener.accept()
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(socket_path)
            except OSError as err:
                system_line(f"cannot reach Agentry through the bridge: {err}")
                client.close()
                upstream.close()
                continue
            threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

    threading.Thread(target=accept, name="agentry-bridge", daemon=True).start()


def route_to_bridge(public_url, bridge_port):
    """Makes the public URL's host and port lead to the bridge, by name or by address."""
    parts = urlsplit(public_url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    original_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(name, service, *args, **kwargs):
        if isinstance(name, (str, bytes)):
            text = name.decode() if isinstance(name, bytes) else name
            if text.strip("[]").lower() == host and str(service) == str(port):
                return original_getaddrinfo("127.0.0.1", bridge_port, *args, **kwargs)
        return original_getaddrinfo(name, service, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo

    # Connections to the public address given as a number skip name resolution.
    def redirect(address):
        if isinstance(address, tuple) and len(address) >= 2:
            if str(address[0]).lower() == host and address[1] == port:
                return ("127.0.0.1", bridge_port)
        return address

    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    socket.socket.connect = lambda self, address: original_connect(self, redirect(address))
    socket.socket.connect_ex = lambda self, address: original_connect_ex(self, redirect(address))


class InspectorLink(logging.Filter):
    """uAgents logs a link to its inspector at the agent's own port, which a hosted agent's owner
    cannot open (it is on the runner's loopback, or inside the sandbox): the link is its page in
    the console instead, where its state, logs and timeline are."""

    PREFIX = "Agent inspector available at "

    def __init__(self, link):
        super().__init__()
        self._link = link

    def filter(self, record):
        if isinstance(record.msg, str) and record.msg.startswith(self.PREFIX):
            record.msg = self.PREFIX + self._link
            record.args = ()
        return True


class LedgerErrorsAsWarnings(logging.Filter):
    """uAgents' ``network`` logger reports the Fetch.ai ledger it cannot reach as errors. A hosted
    agent's Almanac is Agentry, which it reaches; the ledger is optional, and out of reach in a
    sandbox: those lines are warnings, not errors of the agent."""

    def filter(self, record):
        if logging.ERROR <= record.levelno < logging.CRITICAL:
            record.levelno = logging.WARNING
            record.levelname = "WARNING"
        return True


def build_agent(storage):
    """The predefined ``agent``; None (said in the log) where uagents cannot be imported."""
    # Before uagents is imported: it looks at the ledger as it loads.
    logging.getLogger("network").addFilter(LedgerErrorsAsWarnings())
    try:
        from uagents import Agent  # noqa: PLC0415
    except ImportError as err:
        system_line(
            f"uagents cannot be imported by {sys.executable} ({err}); "
            "agent.py runs without a predefined agent"
        )
        return None
    serve_on_loopback()
    run_until_stopped_on_signals(Agent)
    options = {
        "name": os.environ.get("AGENTRY_AGENT_NAME") or None,
        "seed": os.environ["AGENTRY_AGENT_SEED"],
        "port": int(os.environ.get("AGENTRY_AGENT_PORT") or 8000),
        "mailbox": True,
        "agentverse": os.environ["AGENTRY_URL"],
    }
    network = os.environ.get("AGENTRY_AGENT_NETWORK")
    if network:
        options["network"] = network
    agent = Agent(**options)
    agent._storage = storage
    link = f"{os.environ['AGENTRY_URL'].rstrip('/')}/#/hosted/{agent.address}"
    logger = getattr(agent, "_logger", None)
    if not isinstance(logger, logging.Logger):
        logger = logging.getLogger(agent.name)
    logger.addFilter(InspectorLink(link))
    return agent


def serve_on_loopback():
    """An agent's own server listens on loopback: uagents.asgi reads HOST when it serves."""
    try:
        import uagents.asgi  # noqa: PLC0415
    except ImportError:
        return
    if hasattr(uagents.asgi, "HOST"):
        uagents.asgi.HOST = "127.0.0.1"


class Running:
    """Whether an agent was run, so that the bootstrap does not run it again after agent.py."""

    started = False
    on_start = None


def run_until_stopped(runnable):
    """Runs an agent (or a bureau) on its loop until it ends or SIGTERM or SIGINT arrives; a signal
    cancels it, which uAgents' ``run_async`` turns into its shutdown (the Almanac told it stopped,
    the shutdown handlers run). uvicorn, which serves the agent's REST endpoints, takes these
    signals for itself while it runs; the loop still hears them, and hears them again once
    uvicorn hands them back: the first one alone counts."""
    Running.started = True
    if Running.on_start is not None:
        Running.on_start()
    # uAgents makes its loop with the agent; an agent that has none gets one of its own.
    loop = getattr(runnable, "_loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    main = loop.create_task(runnable.run_async())
    stopping = []

    def stop(signum):
        if stopping or main.done():
            return
        stopping.append(signum)
        system_line(f"{signal.Signals(signum).name}: the agent shuts down")
        main.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    try:
        loop.run_until_complete(main)
    except (asyncio.CancelledError, KeyboardInterrupt):
        pass
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        if not loop.is_closed():
            loop.close()


def run_until_stopped_on_signals(agent_class):
    """``Agent.run`` runs the agent as ``run_until_stopped`` does, for agent.py calling it too."""

    def run(self):
        run_until_stopped(self)

    agent_class.run = run


def main():
    # Descriptors beyond the channel belong to the sandbox's start, not to the agent.
    os.closerange(CHANNEL_FD + 1, 1024)
    channel = Channel(CHANNEL_FD)

    here = os.getcwd()
    sys.path.insert(0, here)
    packages = os.environ.get("AGENTRY_PACKAGES")
    if packages and os.path.isdir(packages):
        sys.path.insert(1, packages)

    bridge_port = os.environ.get("AGENTRY_BRIDGE_PORT")
    if bridge_port:
        serve_bridge(int(bridge_port), os.environ["AGENTRY_BRIDGE_SOCKET"])
        route_to_bridge(os.environ["AGENTRY_URL"], int(bridge_port))

    path = os.path.join(here, "agent.py")
    if not os.path.isfile(path):
        reason = "there is no agent.py"
        system_line(f"code failed to load: {reason}")
        channel.notify({"op": "failed", "reason": reason})
        return 1

    try:
        with open(path, encoding="utf-8") as source:
            compile(source.read(), path, "exec")
    except (SyntaxError, ValueError, UnicodeDecodeError) as err:
        traceback.print_exc()
        channel.notify({"op": "failed", "reason": f"{type(err).__name__}: {err}"})
        return 1

    agent = build_agent(ChannelStorage(channel))
    predefined = {"agent": agent} if agent is not None else {}
    # agent.py may run the agent itself (``agent.run()``): it is ready then.
    Running.on_start = lambda: channel.notify({"op": "ready"})
    try:
        runpy.run_path(path, init_globals=predefined, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as err:
        traceback.print_exc()
        # Without a predefined agent, agent.py is the whole program: a later error is a crash.
        if agent is not None or isinstance(err, ImportError):
            channel.notify({"op": "failed", "reason": f"{type(err).__name__}: {err}"})
        return 1

    if agent is None or Running.started:
        return 0
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
