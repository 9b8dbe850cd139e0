"""Write and read a window's ``_manifest.json`` on a pyarrow filesystem (format: ``window.manifest``)."""

from __future__ import annotations

import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc.window.manifest import MANIFEST_NAME, WindowManifest, validate_manifest


def write_manifest(filesystem: pafs.FileSystem, window_dir: str, manifest: WindowManifest) -> str:
    """Validate the manifest and write it atomically (:func:`write_atomically`); return its path.

    :param filesystem: the filesystem of the window directory.
    :param window_dir: the window directory, holding the window's Parquet files already.
    :param manifest: the manifest to write.
    """
    validate_manifest(manifest.to_dict(), f"{window_dir}/{MANIFEST_NAME}")
    return write_atomically(filesystem, window_dir, MANIFEST_NAME, manifest.to_json().encode())


def write_atomically(filesystem: pafs.FileSystem, directory: str, name: str, payload: bytes) -> str:
    """
    Write ``payload`` to ``{directory}/{name}`` so that readers see the old file or the whole new one.

    On a local filesystem the bytes go to a hidden temporary name and are renamed into place;
    object stores make a single upload visible atomically when the stream closes.

    :param filesystem: the target filesystem.
    :param directory: an existing directory on it.
    :param name: the file name.
    :param payload: the whole content.
    :return: the path written.
    """
    final = f"{directory}/{name}"
    if isinstance(filesystem, pafs.LocalFileSystem):
        tmp = f"{directory}/.{name}.tmp"
        with filesystem.open_output_stream(tmp) as out:
            out.write(payload)
        filesystem.move(tmp, final)
    else:
        with filesystem.open_output_stream(final) as out:
            out.write(payload)
    return final


def read_manifest(filesystem: pafs.FileSystem, window_dir: str) -> WindowManifest:
    """Read and validate the manifest of a window directory (the job reads with ``window_reader.load_window``).

    :param filesystem: the filesystem of the window directory.
    :param window_dir: the window directory.
    """
    path = f"{window_dir}/{MANIFEST_NAME}"
    with filesystem.open_input_stream(path) as src:
        return WindowManifest.from_json(src.read(), path)
