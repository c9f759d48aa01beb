from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import FaultProxy, Server  # noqa: E402


class Servers:
    """One server per distinct `server.args`, shared by the scenarios that agree."""

    def __init__(self) -> None:
        self.by_args: Dict[Tuple[str, ...], Server] = {}

    def get(self, args: Tuple[str, ...] = ()) -> Server:
        if args not in self.by_args:
            self.by_args[args] = Server(list(args))
        return self.by_args[args]

    def stop(self) -> None:
        for server in self.by_args.values():
            server.stop()


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def server(servers: Servers) -> Server:
    return servers.get()


@pytest.fixture
def proxy(server: Server) -> Iterator[Callable[[Callable[[str, str, dict], bool]], FaultProxy]]:
    """``proxy(lose)``: a new :class:`FaultProxy` in front of ``server``, stopped
    after the test."""
    made: List[FaultProxy] = []

    def make(lose: Callable[[str, str, dict], bool]) -> FaultProxy:
        p = FaultProxy(server.url, lose)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()
