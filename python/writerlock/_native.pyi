# The native extension module. Its public names are typed where the package re-exports them
# (writerlock/__init__.pyi, writerlock/postgres.pyi); inside the package it is used untyped.
from typing import Any

def __getattr__(name: str) -> Any: ...
