"""Blob storage as the emulator answers it, path-style (/ACCOUNT/CONTAINER/BLOB): block and whole-blob
uploads, ranged reads of blobs and of the jobs' live logs, and container listings in the Blob service's XML."""

from __future__ import annotations

import re
import time
import uuid
from typing import Dict, List, Tuple
from urllib.parse import unquote
from xml.etree import ElementTree
from xml.sax.saxutils import escape as xml_escape

from .wire import ARTIFACT_CONTAINER, Blob, HTTPError, _http_date, _meta


class BlobStorage:
    """AzureMLEmulator's blob routes (a mixin: the blobs and faults are the emulator's)."""

    def _blob(self, method: str, rest: str, query: Dict[str, str], headers: Dict[str, str],
              body: bytes) -> Tuple[int, Dict[str, str], bytes]:
        if "sig" not in query and not headers.get("authorization"):
            raise HTTPError(403, "AuthenticationFailed", "Server failed to authenticate the request (no SAS).",
                            {"x-ms-error-code": "AuthenticationFailed"})
        rest = rest.lstrip("/")
        container, _, blob_name = rest.partition("/")
        blob_name = unquote(blob_name)
        container = unquote(container)
        self.artifacts.check_access(container, query, headers)
        comp, restype = query.get("comp"), query.get("restype")
        base = {"x-ms-version": headers.get("x-ms-version", "2021-08-06"), "x-ms-request-id": str(uuid.uuid4())}
        if restype == "container" and not blob_name:
            if method == "GET" and comp == "list":
                return self._list_blobs(container, query, base)
            if method in ("GET", "HEAD"):
                return 200, dict(base, **{"ETag": '"0x1"', "Last-Modified": _http_date(time.time())}), b""
            if method == "PUT":
                return 201, base, b""
        key = (container, blob_name)
        if method == "PUT":
            if comp == "block":
                with self._lock:
                    self._blocks.setdefault(key, {})[query["blockid"]] = body
                return 201, base, b""
            if comp == "blocklist":
                ids = [el.text or "" for el in ElementTree.fromstring(body)]
                with self._lock:
                    staged = self._blocks.pop(key, {})
                    data = b"".join(staged[i] for i in ids)
                    blob = Blob(data, headers.get("x-ms-blob-content-type", "application/octet-stream"),
                                _meta(headers))
                    self.blobs[key] = blob
                return 201, dict(base, ETag=blob.etag, **{"Last-Modified": _http_date(blob.last_modified)}), b""
            if comp == "metadata":
                with self._lock:
                    blob = self._get_blob(key)
                    blob.metadata = _meta(headers)
                return 200, dict(base, ETag=blob.etag), b""
            if comp is None:
                blob = Blob(body, headers.get("x-ms-blob-content-type") or headers.get("content-type")
                            or "application/octet-stream", _meta(headers))
                with self._lock:
                    self.blobs[key] = blob
                return 201, dict(base, ETag=blob.etag, **{"Last-Modified": _http_date(blob.last_modified),
                                                          "x-ms-request-server-encrypted": "true"}), b""
        if method in ("GET", "HEAD"):
            blob = self._blob_or_log(key)
            return self._serve_blob(method, blob, headers, base)
        if method == "DELETE":
            with self._lock:
                self._get_blob(key)
                del self.blobs[key]
            return 202, base, b""
        raise HTTPError(400, "UnsupportedHttpVerb", f"The emulator does not support {method} {rest}")

    def _get_blob(self, key: Tuple[str, str]) -> Blob:
        if key not in self.blobs:
            raise HTTPError(404, "BlobNotFound", "The specified blob does not exist.", {"x-ms-error-code": "BlobNotFound"})
        return self.blobs[key]

    def _blob_or_log(self, key: Tuple[str, str]) -> Blob:
        container, name = key
        m = re.match(r"^ExperimentRun/dcid\.([^/]+)/(.+)$", name)
        with self._lock:
            if container == ARTIFACT_CONTAINER and m and m.group(1) in self._jobs:
                state = self._jobs[m.group(1)]
                try:
                    text = self._log_text(state, m.group(2))
                except KeyError:
                    pass
                else:
                    return Blob(text.encode("utf-8"), "text/plain; charset=utf-8", {}, state.created)
            return self._get_blob(key)

    def _serve_blob(self, method: str, blob: Blob, headers: Dict[str, str],
                    base: Dict[str, str]) -> Tuple[int, Dict[str, str], bytes]:
        data = blob.data
        out = dict(base)
        out.update({"Content-Type": blob.content_type, "ETag": blob.etag,
                    "Last-Modified": _http_date(blob.last_modified), "x-ms-blob-type": "BlockBlob",
                    "Accept-Ranges": "bytes", "x-ms-creation-time": _http_date(blob.last_modified),
                    "x-ms-lease-state": "available", "x-ms-lease-status": "unlocked",
                    "x-ms-server-encrypted": "true"})
        for k, v in blob.metadata.items():
            out[f"x-ms-meta-{k}"] = v
        rng = headers.get("x-ms-range") or headers.get("range")
        status = 200
        if rng:
            # Only the two documented forms, bytes=START- and bytes=START-END; a suffix range
            # (bytes=-N) or anything else is a malformed header to the Blob service.
            m = re.match(r"bytes=(\d+)-(\d*)$", rng.strip())
            if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                raise HTTPError(400, "InvalidHeaderValue", "The value for one of the HTTP headers is not in the "
                                "correct format.", {"x-ms-error-code": "InvalidHeaderValue"})
            size = len(data)
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else size - 1
            if start >= size:
                out["Content-Range"] = f"bytes */{size}"
                raise HTTPError(416, "InvalidRange", "The range specified is invalid for the current size of the resource.",
                                {"Content-Range": f"bytes */{size}", "x-ms-error-code": "InvalidRange"})
            end = min(end, size - 1)
            out["Content-Range"] = f"bytes {start}-{end}/{size}"
            data = data[start:end + 1]
            status = 206
        if method == "HEAD":
            out["Content-Length"] = str(len(data))
            return status, out, b""
        return status, out, data

    def _list_blobs(self, container: str, query: Dict[str, str], base: Dict[str, str]) -> Tuple[int, Dict[str, str], bytes]:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter")
        include_meta = "metadata" in (query.get("include") or "")
        max_results = int(query.get("maxresults") or 5000)
        marker = query.get("marker") or ""
        with self._lock:
            blobs = {n: b for (c, n), b in self.blobs.items() if c == container and n.startswith(prefix)}
            blobs.update(self.artifacts.listed(container, prefix))
            names = sorted(n for n in blobs if n > marker)
            items: List[str] = []
            prefixes: List[str] = []
            next_marker = ""
            last = ""
            for n in names:
                if delimiter:
                    cut = n.find(delimiter, len(prefix))
                    if cut >= 0:
                        p = n[: cut + len(delimiter)]
                        if p not in prefixes:
                            prefixes.append(p)
                        continue
                if len(items) >= max_results:
                    next_marker = last
                    break
                last = n
                b = blobs[n]
                meta = "".join(f"<{k}>{xml_escape(v)}</{k}>" for k, v in b.metadata.items()) if include_meta else ""
                items.append(
                    f"<Blob><Name>{xml_escape(n)}</Name><Properties>"
                    f"<Creation-Time>{_http_date(b.last_modified)}</Creation-Time>"
                    f"<Last-Modified>{_http_date(b.last_modified)}</Last-Modified><Etag>{b.etag}</Etag>"
                    f"<Content-Length>{len(b.data)}</Content-Length><Content-Type>{xml_escape(b.content_type)}"
                    f"</Content-Type><BlobType>BlockBlob</BlobType><LeaseStatus>unlocked</LeaseStatus>"
                    f"<LeaseState>available</LeaseState><ServerEncrypted>true</ServerEncrypted></Properties>"
                    + (f"<Metadata>{meta}</Metadata>" if include_meta else "") + "</Blob>"
                )
        xml = (
            '<?xml version="1.0" encoding="utf-8"?>'
            f'<EnumerationResults ServiceEndpoint="{xml_escape(self.storage_url)}/" ContainerName="{xml_escape(container)}">'
            f"<Prefix>{xml_escape(prefix)}</Prefix><MaxResults>{max_results}</MaxResults>"
            + (f"<Delimiter>{xml_escape(delimiter)}</Delimiter>" if delimiter else "")
            + "<Blobs>" + "".join(items)
            + "".join(f"<BlobPrefix><Name>{xml_escape(p)}</Name></BlobPrefix>" for p in prefixes)
            + f"</Blobs><NextMarker>{xml_escape(next_marker)}</NextMarker></EnumerationResults>"
        ).encode("utf-8")
        return 200, dict(base, **{"Content-Type": "application/xml"}), xml
