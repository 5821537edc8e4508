"""Writing env records: an env's body, with its folder's files pinned as an artifact."""

from __future__ import annotations

from agentenv_local.artifacts import BUNDLE, files_digest, put_artifact

from .records import McpServerEnv, MultiEnv


def env_body(store, env_id: str, env: McpServerEnv | MultiEnv, files: dict[str, bytes], *,
             default_name: str, dry_run: bool = False) -> dict:
    """The document body for `env`. Its files (if any) are stored as `<env id>__files` (a new
    version only when they changed; nothing when `dry_run`) and pinned in `files`."""
    body = env.model_dump(mode="json", exclude_none=True)
    body.setdefault("name" if isinstance(env, MultiEnv) else "environment_name", default_name)
    if files:
        files_id = f"{env_id}__files"
        digest = files_digest(files)
        latest = store.documents.find("artifacts", files_id)
        if latest is not None and latest.get("digest") == digest:
            version = latest["version"]
        elif dry_run:
            version = (latest["version"] + 1) if latest else 1
        else:
            version = put_artifact(store, files_id, files, artifact_type=BUNDLE, digest=digest,
                                   description=f"the files of env {env_id}", if_changed=True)["version"]
        body["files"] = {"id": files_id, "version": version}
    return body
