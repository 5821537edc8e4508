"""Compatibility with the reference's own files: what a user of the reference brings (env folders written
with its `agentenv_protocol` SDK, verifier scripts written for mcp 1.x, its field and type names) runs here
unchanged. Each module maps one of the reference's surfaces onto ours; nothing here is imported by the core
unless a reference-shaped input asks for it."""
