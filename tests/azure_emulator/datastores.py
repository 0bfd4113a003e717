"""The workspace's datastores: the two the service makes (workspaceblobstore, the default, and
workspaceartifactstore, where job outputs and logs live: artifact_store.py) and any a client creates.

Shapes, from test_blob_store.json and test_command_job_serverless.json (recordings/manifest.json):
- PUT datastores/NAME answers 201 with a Location naming it; the body keeps no secret: credentials say
  only their credentialsType; server fields subscriptionId/resourceGroup/description/properties null,
  serviceDataAccessAuthIdentity "None";
- GET answers the same; the list (`?count=30&orderByAsc=false`) a `value` of them;
- listSecrets with `expirableSecret: true` (what azure-ai-ml always sends) answers a SAS token, also for an
  account-key datastore ("secretsType": "Sas"); without it the REST spec's AccountKeyDatastoreSecrets.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .server import AzureMLEmulator

ARTIFACT_DATASTORE = "workspaceartifactstore"
# an account SAS as the recording shows it (srt=co&ss=bf&sp=rcuwdl), with a signature of its own: the
# artifact store's "refused" mode tells it from the service-signed URLs in logFiles
ACCOUNT_SAS = "sv=2021-08-06&ss=bf&srt=co&sp=rcuwdl&se=2099-01-01T00%3A00%3A00Z&sig=YWNjb3VudC1zYXM%3D"


class Datastores:
    def __init__(self, emu: "AzureMLEmulator") -> None:
        self.emu = emu
        self.created: Dict[str, Dict[str, Any]] = {}    # name -> resource, as PUT by a client
        self.keys: Dict[str, str] = {}

    def resource(self, name: str) -> Dict[str, Any]:
        from .wire import DEFAULT_DATASTORE, HTTPError

        if name == DEFAULT_DATASTORE:          # as recorded (test_command_job_serverless.json)
            resource = self.emu._datastore()
            resource["properties"].update(subscriptionId=self.emu.subscription_id,
                                          resourceGroup=self.emu.resource_group, tags=None)
            return resource
        if name == ARTIFACT_DATASTORE:
            return self.emu.artifacts.resource()
        if name in self.created:
            return copy.deepcopy(self.created[name])
        raise HTTPError(404, "UserError", f"Datastore '{name}' was not found.")

    def call(self, method: str, parts: List[str], query: Dict[str, str],
             body: Any) -> Tuple[int, Dict[str, str], bytes]:
        from .wire import HTTPError, _json

        n = len(parts)
        if n == 1 and method == "GET":
            from .wire import DEFAULT_DATASTORE

            names = [DEFAULT_DATASTORE, ARTIFACT_DATASTORE, *sorted(self.created)]
            return _json(200, {"value": [self.resource(x) for x in names]})
        if n == 2 and method == "GET":
            return _json(200, self.resource(parts[1]))
        if n == 2 and method == "PUT":
            return self._put(parts[1], query, body)
        if n == 3 and parts[2] == "listSecrets" and method == "POST":
            return _json(200, self.secrets(parts[1], body))
        raise HTTPError(404, "NotFound", f"The emulator has no route for {method} datastores/{'/'.join(parts[1:])}")

    def secrets(self, name: str, body: Any) -> Dict[str, Any]:
        from .wire import SAS_QUERY

        self.resource(name)                                  # 404 for an unknown datastore
        expirable = bool((body or {}).get("expirableSecret"))
        if name == ARTIFACT_DATASTORE:
            return self.emu.artifacts.secrets(expirable)
        if expirable or name not in self.keys:
            return {"secretsType": "Sas", "sasToken": SAS_QUERY}
        return {"secretsType": "AccountKey", "key": self.keys[name]}

    def _put(self, name: str, query: Dict[str, str], body: Any) -> Tuple[int, Dict[str, str], bytes]:
        from .wire import _PROVIDER, HTTPError, _json, _system_data

        props = (body or {}).get("properties") if isinstance(body, dict) else None
        if not isinstance(props, dict) or not props.get("datastoreType"):
            raise HTTPError(400, "UserError", "A datastore needs properties.datastoreType.")
        creds = dict(props.get("credentials") or {"credentialsType": "None"})
        key: Optional[str] = (creds.pop("secrets", None) or {}).get("key")
        if key:
            self.keys[name] = key
        resource = {
            "id": self.emu.arm_id("datastores", name), "name": name, "type": f"{_PROVIDER}/workspaces/datastores",
            "properties": {"description": props.get("description"), "tags": props.get("tags") or {},
                           "properties": props.get("properties"), "isDefault": False, "credentials": creds,
                           "subscriptionId": None, "resourceGroup": None,
                           **{k: v for k, v in props.items() if k not in ("credentials", "tags", "description",
                                                                          "properties")},
                           "serviceDataAccessAuthIdentity": props.get("serviceDataAccessAuthIdentity") or "None"},
            "systemData": _system_data(),
        }
        self.created[name] = resource
        location = f"{self.emu.url}{self.emu.arm_id('datastores', name)}?api-version=" + query.get("api-version", "")
        if "skipValidation" in query:
            location += "&skipValidation=" + query["skipValidation"]
        return _json(201, copy.deepcopy(resource), {"Location": location})
