"""Bundles: a folder with envs/ agents/ artifacts/ skills/ tasks/ evals/, run as a project."""

from .discovery import BundleInfo, find_bundle, known_bundles
from .loader import Bundle, load_bundle
from .materialize import MaterializeResult, materialize

__all__ = ["Bundle", "BundleInfo", "MaterializeResult", "find_bundle", "known_bundles", "load_bundle", "materialize"]
