"""The Environment Card and the data-plane Part types, in the reference's wire shapes.

Card (served at `/.well-known/agent-env.json`)::

    {"name": "echo", "protocolVersion": "1.0", "url": "/agentenv", "preferredTransport": "JSONRPC",
     "additionalInterfaces": [{"url": "/mcp", "transport": "mcp"}],
     "capabilities": {"extensions": null, "tools": [{"name", "description", "inputSchema"}], "operations": []},
     "children_environments": null}

(`description` follows `name` when the env sets one.) URLs are paths relative to where the card was fetched.
`capabilities.operations` lists the data-plane methods served at `url`: `[]` = none; absent = a legacy card
that serves the full trio.

Parts (A2A-like, in `data/add` params and `data/get` results): `{"kind": "text", "text"}`,
`{"kind": "file", "file": {"bytes": <base64> | "uri": file://… | https://…, "mimeType", "name"}}`,
`{"kind": "data", "data": {...}}`, each with optional `metadata`.
"""

from __future__ import annotations

import base64
import pathlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

PROTOCOL_VERSION = "1.0"
WELL_KNOWN_PATH = "/.well-known/agent-env.json"
RPC_PATH = "/agentenv"
MCP_PATH = "/mcp"
MCP_TRANSPORT = "mcp"
METHOD_RESET = "data/reset"
METHOD_ADD = "data/add"
METHOD_GET = "data/get"
OPERATIONS = (METHOD_RESET, METHOD_ADD, METHOD_GET)


# --- parts -----------------------------------------------------------------------------------------------

class FileWithBytes(BaseModel):
    bytes: str
    mimeType: str | None = None
    name: str | None = None


class FileWithUri(BaseModel):
    uri: str
    mimeType: str | None = None
    name: str | None = None


class TextPart(BaseModel):
    kind: Literal["text"] = "text"
    text: str
    metadata: dict | None = None


class FilePart(BaseModel):
    kind: Literal["file"] = "file"
    file: FileWithBytes | FileWithUri
    metadata: dict | None = None

    @classmethod
    def from_bytes(cls, data: bytes, *, mime_type: str | None = None, name: str | None = None,
                   metadata: dict | None = None) -> FilePart:
        """An inline file part (the bytes travel base64-encoded)."""
        return cls(file=FileWithBytes(bytes=base64.b64encode(data).decode("ascii"), mimeType=mime_type, name=name),
                   metadata=metadata)

    @classmethod
    def from_path(cls, path: str | pathlib.Path, *, mime_type: str | None = None, name: str | None = None,
                  metadata: dict | None = None) -> FilePart:
        """A file part that points at a local file (`file://` URI); the receiver reads it from disk."""
        p = pathlib.Path(path).resolve()
        return cls(file=FileWithUri(uri=p.as_uri(), mimeType=mime_type, name=name or p.name), metadata=metadata)

    @property
    def name(self) -> str | None:
        return self.file.name

    @property
    def mime_type(self) -> str | None:
        return self.file.mimeType

    def read_bytes(self, *, timeout: float = 120.0) -> bytes:
        """The file's content: decoded inline bytes, a `file://` file read from disk, or an `http(s)://` download."""
        if isinstance(self.file, FileWithBytes):
            return base64.b64decode(self.file.bytes, validate=False)
        import urllib.request

        uri = self.file.uri
        scheme = urllib.parse.urlsplit(uri).scheme.lower()
        if scheme == "file":
            return pathlib.Path(urllib.request.url2pathname(urllib.parse.urlsplit(uri).path)).read_bytes()
        if scheme in ("http", "https"):
            with urllib.request.urlopen(uri, timeout=timeout) as response:
                return response.read()
        if scheme == "":
            return pathlib.Path(uri).read_bytes()
        raise ValueError(f"cannot read a file part with a {scheme!r} URI: {uri}")

    async def aread_bytes(self, *, timeout: float = 120.0) -> bytes:
        """`read_bytes` off the event loop."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(lambda: self.read_bytes(timeout=timeout))


class DataPart(BaseModel):
    kind: Literal["data"] = "data"
    data: dict
    metadata: dict | None = None


Part = Annotated[TextPart | FilePart | DataPart, Field(discriminator="kind")]


class AddDataRequest(BaseModel):
    parts: list[Part] = Field(min_length=1)


class GetDataResponse(BaseModel):
    parts: list[Part]


def part_to_wire(part: Any) -> dict:
    """A part (model or dict) as the JSON object that goes on the wire (None fields dropped)."""
    if isinstance(part, BaseModel):
        return part.model_dump(mode="json", exclude_none=True)
    return dict(part)


# --- the card --------------------------------------------------------------------------------------------

class EnvironmentInterface(BaseModel):
    url: str
    transport: str


class EnvironmentExtension(BaseModel):
    uri: str
    description: str | None = None
    params: dict | None = None
    required: bool | None = None


class EnvironmentTool(BaseModel):
    name: str
    description: str | None = None
    inputSchema: dict | None = None


class EnvironmentCapabilities(BaseModel):
    extensions: list[EnvironmentExtension] | None = None
    tools: list[EnvironmentTool] | None = None
    operations: list[str] | None = None


class EnvironmentCard(BaseModel):
    name: str
    description: str | None = None
    protocolVersion: str = PROTOCOL_VERSION
    url: str = RPC_PATH
    preferredTransport: str = "JSONRPC"
    additionalInterfaces: list[EnvironmentInterface] = Field(default_factory=list)
    capabilities: EnvironmentCapabilities = Field(default_factory=EnvironmentCapabilities)
    children_environments: list[EnvironmentCard] | None = None

    def to_wire(self) -> dict:
        """The card as served: the reference's shape, with `description` only when set."""
        return _card_wire(self.model_dump(mode="json"))

    def mcp_path(self) -> str:
        """The path of the MCP endpoint this card declares (`/mcp` by convention when it declares none)."""
        for interface in self.additionalInterfaces:
            if interface.transport == MCP_TRANSPORT and interface.url:
                return interface.url
        return MCP_PATH


def _card_wire(card: dict) -> dict:
    if card.get("description") is None:
        card.pop("description", None)
    children = card.get("children_environments")
    if children:
        card["children_environments"] = [_card_wire(child) for child in children]
    return card


EnvironmentCard.model_rebuild()

# The fields @environment_card accepts (the ones the SDK fills itself are refused there).
CARD_CONFIG_FIELDS = frozenset({"name", "description", "protocolVersion", "url", "preferredTransport",
                                "additionalInterfaces", "capabilities", "children_environments"})
