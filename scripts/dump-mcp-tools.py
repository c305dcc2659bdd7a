#!/usr/bin/env python3
"""Tool lists of real MCP servers, as the servers return them on tools/list,
for tests/data/mcp-sessions/ (see its README.md).

Install the servers into one directory (not ~/.cache), then run this script
with that directory:

    D=/tmp/mcp-dump
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix $D \
        @modelcontextprotocol/server-brave-search@0.6.2 \
        @modelcontextprotocol/server-everart@0.6.2 \
        @modelcontextprotocol/server-everything@2026.8.31 \
        @modelcontextprotocol/server-filesystem@2026.8.31 \
        @modelcontextprotocol/server-gdrive@2025.1.14 \
        @modelcontextprotocol/server-github@2025.4.8 \
        @modelcontextprotocol/server-gitlab@2025.4.25 \
        @modelcontextprotocol/server-google-maps@0.6.2 \
        @modelcontextprotocol/server-memory@2026.8.31 \
        @modelcontextprotocol/server-postgres@0.6.2 \
        @modelcontextprotocol/server-puppeteer@2025.5.12 \
        @modelcontextprotocol/server-redis@2025.4.25 \
        @modelcontextprotocol/server-sequential-thinking@2026.8.31 \
        @modelcontextprotocol/server-slack@2025.4.25
    python3 -m venv $D/venv
    $D/venv/bin/pip install mcp==2.3.0 mcp-server-git==2026.10.19 \
        mcp-server-time==2026.10.19 mcp-server-fetch==2026.10.24
    # mcp-server-sqlite 2025.4.25 was written for the 1.x SDK (it fails on
    # import with mcp 2.x, which the others require), so it gets its own venv:
    python3 -m venv $D/venv-sqlite
    $D/venv-sqlite/bin/pip install mcp==1.30.0 mcp-server-sqlite==2025.4.25
    $D/venv/bin/python scripts/dump-mcp-tools.py $D [OUT]

OUT defaults to tests/data/mcp-sessions/tools.json beside this script's repo.
It must run with the venv's python (it uses the official `mcp` SDK). Each
server is started over stdio with dummy tokens / URLs / paths (nothing is
called but initialize and tools/list, so nothing goes over the network);
the redis server connects at startup, so a throwaway `redis-server` on a
loopback port is started when one is on PATH, else a stub that answers +OK
to every command. A server that fails is reported on stderr and left out.

Writes {"<server>": [{"name", "description", "inputSchema"}, ...], ...},
servers sorted by name, tools in the order the server lists them.
"""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import PaginatedRequestParams

TIMEOUT_S = 60


def servers(install: Path, work: Path, redis_url: str) -> dict:
    """short name -> (command, args, env)"""
    nbin = install / "node_modules" / ".bin"
    root = work / "files"
    root.mkdir()
    creds = work / "gdrive-credentials.json"
    creds.write_text(json.dumps({"access_token": "dummy", "token_type": "Bearer"}))
    npm = {
        "brave-search": ([], {"BRAVE_API_KEY": "dummy"}),
        "everart": ([], {"EVERART_API_KEY": "dummy"}),
        "everything": (["stdio"], {}),
        "filesystem": ([str(root)], {}),
        "gdrive": ([], {"GDRIVE_CREDENTIALS_PATH": str(creds)}),
        "github": ([], {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy"}),
        "gitlab": ([], {"GITLAB_PERSONAL_ACCESS_TOKEN": "dummy",
                        "GITLAB_API_URL": "https://gitlab.invalid/api/v4"}),
        "google-maps": ([], {"GOOGLE_MAPS_API_KEY": "dummy"}),
        "memory": ([], {"MEMORY_FILE_PATH": str(work / "memory.json")}),
        "postgres": (["postgresql://dummy:dummy@127.0.0.1:1/dummy"], {}),
        "puppeteer": ([], {"PUPPETEER_SKIP_DOWNLOAD": "1"}),
        "redis": ([redis_url], {}),
        "sequential-thinking": ([], {"DISABLE_THOUGHT_LOGGING": "true"}),
        "slack": ([], {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T00000000"}),
    }
    py = {
        "fetch": ("venv", []),
        "git": ("venv", []),
        "sqlite": ("venv-sqlite", ["--db-path", str(work / "dummy.db")]),
        "time": ("venv", ["--local-timezone", "UTC"]),
    }
    out = {}
    for name, (args, env) in npm.items():
        out[name] = (str(nbin / f"mcp-server-{name}"), args, env)
    for name, (venv, args) in py.items():
        out[name] = (str(install / venv / "bin" / f"mcp-server-{name}"), args, {})
    return out


async def list_tools(command: str, args: list, env: dict, errlog) -> list:
    params = StdioServerParameters(command=command, args=args, env=env)
    tools = []
    with anyio.fail_after(TIMEOUT_S):
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                cursor = None
                while True:
                    res = await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                    tools.extend(res.tools)
                    cursor = res.next_cursor
                    if not cursor:
                        break
    return [{"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in tools]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(work: Path):
    """(url, stop) for a throwaway redis on a loopback port."""
    port = free_port()
    if shutil.which("redis-server"):
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(work)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        return f"redis://127.0.0.1:{port}", lambda: (proc.terminate(), proc.wait())
    # Stub: reply +OK to each RESP command (enough for the client's connect).
    stub = (
        "import socket,threading\n"
        "def h(c):\n"
        "    buf=b''\n"
        "    while True:\n"
        "        d=c.recv(65536)\n"
        "        if not d: return\n"
        "        buf+=d\n"
        "        n=buf.count(b'*')\n"
        "        buf=b''\n"
        "        c.sendall(b'+OK\\r\\n'*max(n,1))\n"
        "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        f"s.bind(('127.0.0.1',{port})); s.listen()\n"
        "while True:\n"
        "    c,_=s.accept(); threading.Thread(target=h,args=(c,),daemon=True).start()\n")
    proc = subprocess.Popen([sys.executable, "-c", stub])
    time.sleep(0.5)
    return f"redis://127.0.0.1:{port}", lambda: (proc.terminate(), proc.wait())


async def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    install = Path(sys.argv[1]).resolve()
    repo = Path(__file__).resolve().parent.parent
    out_path = Path(sys.argv[2]) if len(sys.argv) == 3 else \
        repo / "tests" / "data" / "mcp-sessions" / "tools.json"
    result, failed = {}, {}
    with tempfile.TemporaryDirectory(prefix="mcp-dump-") as tmp:
        work = Path(tmp)
        redis_url, stop_redis = start_redis(work)
        try:
            table = servers(install, work, redis_url)
            errlog = open(work / "stderr.log", "w+")
            for name in sorted(table):
                command, args, env = table[name]
                if not Path(command).exists():
                    failed[name] = f"not installed ({command})"
                    continue
                errlog.write(f"--- {name}\n")
                errlog.flush()
                try:
                    result[name] = await list_tools(command, args, env, errlog)
                except BaseException as e:  # noqa: BLE001 - report and go on
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    failed[name] = f"{type(e).__name__}: {e}"
                print(f"{name}: {len(result.get(name, []))} tools"
                      + (f" FAILED {failed[name]}" if name in failed else ""),
                      file=sys.stderr)
            errlog.seek(0)
            log = errlog.read()
        finally:
            stop_redis()
    if failed:
        print("\nserver stderr:\n" + log, file=sys.stderr)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(dict(sorted(result.items())), f, indent=1, ensure_ascii=False)
        f.write("\n")
    n = sum(len(v) for v in result.values())
    print(f"{len(result)} servers, {n} tools -> {out_path}", file=sys.stderr)
    for name, why in sorted(failed.items()):
        print(f"failed: {name}: {why}", file=sys.stderr)
    return 0 if result else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
