"""The gs:// and az:// checkpoint stores (convoy._gcs.GCSStore, convoy._azure.AzureStore) against real
servers, fake-gcs-server and Azurite, which test/integration/sdkstorage starts and names in
CONVOY_TEST_GCS_ENDPOINT and CONVOY_TEST_AZURE_{ACCOUNT,KEY,ENDPOINT} (without them, as in make
test-unit, those tests skip); keyless credentials (the GKE metadata server, Azure Workload Identity)
against token servers on 127.0.0.1."""

import json
import os
import tempfile
import threading
import unittest
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import support  # noqa: F401 (the package under test on sys.path)

from convoy._azure import AzureStore
from convoy._gcs import GCSStore

GCS = os.environ.get("CONVOY_TEST_GCS_ENDPOINT", "")
AZURE = {name: os.environ.get("CONVOY_TEST_AZURE_" + name, "") for name in ("ACCOUNT", "KEY", "ENDPOINT")}


class Contract:
    """What every store does, on self.store, an empty bucket or container."""

    def test_put_list_get_delete(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        src = os.path.join(tmp.name, "weights.pt")
        data = os.urandom(3 << 20) + b"end"
        with open(src, "wb") as f:
            f.write(data)
        self.store.put("ns/job/attempt-0/epoch 1/weights.pt", src)
        self.store.put_bytes("ns/job/attempt-0/epoch 1/état+meta.json", b'{"epoch": 1}')
        self.store.put_bytes("ns/jobs-other/x", b"not this job's")
        self.assertEqual(self.store.list("ns/job/"), ["ns/job/attempt-0/epoch 1/weights.pt", "ns/job/attempt-0/epoch 1/état+meta.json"])
        dst = os.path.join(tmp.name, "restored.pt")
        self.store.get("ns/job/attempt-0/epoch 1/weights.pt", dst)
        with open(dst, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(self.store.get_bytes("ns/job/attempt-0/epoch 1/état+meta.json"), b'{"epoch": 1}')
        self.store.delete("ns/job/attempt-0/epoch 1/weights.pt")
        self.store.delete("ns/job/attempt-0/epoch 1/weights.pt")  # gone already: no error
        self.assertEqual(self.store.list("ns/"), ["ns/job/attempt-0/epoch 1/état+meta.json", "ns/jobs-other/x"])

    def test_a_missing_key_is_file_not_found(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        with self.assertRaises(FileNotFoundError):
            self.store.get_bytes("ns/job/nothing")
        with self.assertRaises(FileNotFoundError):
            self.store.get("ns/job/nothing", os.path.join(tmp.name, "dst"))
        self.assertEqual(os.listdir(tmp.name), [])
        self.assertEqual(self.store.list("ns/"), [])


@unittest.skipUnless(GCS, "needs fake-gcs-server: CONVOY_TEST_GCS_ENDPOINT (test/integration/sdkstorage sets it)")
class GCSTest(Contract, unittest.TestCase):
    def setUp(self):
        bucket = "ckpt-" + uuid.uuid4().hex[:12]
        body = json.dumps({"name": bucket}).encode()
        request = urllib.request.Request(GCS + "/storage/v1/b", data=body, method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()
        self.store = GCSStore(bucket, env={"STORAGE_EMULATOR_HOST": GCS})


@unittest.skipUnless(all(AZURE.values()), "needs Azurite: CONVOY_TEST_AZURE_ACCOUNT, _KEY, _ENDPOINT (test/integration/sdkstorage sets them)")
class AzureTest(Contract, unittest.TestCase):
    def env(self, **changes):
        env = {"AZURE_STORAGE_ACCOUNT": AZURE["ACCOUNT"], "AZURE_STORAGE_KEY": AZURE["KEY"],
               "AZURE_STORAGE_BLOB_ENDPOINT": AZURE["ENDPOINT"]}
        env.update(changes)
        return env

    def setUp(self):
        self.container = "ckpt-" + uuid.uuid4().hex[:12]
        self.store = AzureStore(self.container, env=self.env())
        self.store._request("PUT", self.store._container(), query={"restype": "container"}).close()

    def test_a_wrong_key_is_refused(self):
        wrong = AzureStore(self.container, env=self.env(AZURE_STORAGE_KEY="d3Jvbmcga2V5"))
        with self.assertRaises(PermissionError):
            wrong.put_bytes("ns/job/x", b"written with the wrong key")
        with self.assertRaises(PermissionError):
            wrong.list("")
        self.assertEqual(self.store.list(""), [])

    def test_a_connection_string(self):
        value = "DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;" % (
            AZURE["ACCOUNT"], AZURE["KEY"], AZURE["ENDPOINT"])
        store = AzureStore(self.container, env={"AZURE_STORAGE_CONNECTION_STRING": value})
        store.put_bytes("ns/job/x", b"x")
        self.assertEqual(self.store.get_bytes("ns/job/x"), b"x")


class TokenServer:
    """An HTTP server on 127.0.0.1 that answers each request with answer(method, path, headers, body)
    -> (code, content type, body) and records the requests."""

    def __init__(self, answer):
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append((self.command, self.path, dict(self.headers), body))
                code, kind, reply = answer(self.command, self.path, self.headers, body)
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = do_PUT = do_DELETE = handle_one

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = "127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class KeylessCredentialsTest(unittest.TestCase):
    def serve(self, answer):
        server = TokenServer(answer)
        self.addCleanup(server.close)
        return server

    def test_azure_workload_identity_exchanges_the_federated_token(self):
        listing = b'<?xml version="1.0"?><EnumerationResults><Blobs><Blob><Name>ns/job/x</Name></Blob></Blobs><NextMarker/></EnumerationResults>'

        def answer(method, path, headers, body):
            if path == "/tenant-1/oauth2/v2.0/token":
                return 200, "application/json", json.dumps({"access_token": "entra-token", "expires_in": 3600}).encode()
            if headers.get("Authorization") == "Bearer entra-token":
                return 200, "application/xml", listing
            return 403, "text/plain", b"no"

        server = self.serve(answer)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        token_file = os.path.join(tmp.name, "azure-identity-token")
        with open(token_file, "w") as f:
            f.write("projected-service-account-token\n")
        store = AzureStore("ckpt", env={
            "AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_BLOB_ENDPOINT": "http://%s/acct" % server.host,
            "AZURE_FEDERATED_TOKEN_FILE": token_file, "AZURE_CLIENT_ID": "client-1", "AZURE_TENANT_ID": "tenant-1",
            "AZURE_AUTHORITY_HOST": "http://%s/" % server.host})
        self.assertEqual(store.list("ns/"), ["ns/job/x"])
        self.assertEqual(store.list("ns/"), ["ns/job/x"])
        tokens = [r for r in server.requests if r[1].endswith("/token")]
        self.assertEqual(len(tokens), 1, "the token is reused until it expires")
        form = dict(urllib.parse.parse_qsl(tokens[0][3].decode()))
        self.assertEqual((form["client_assertion"], form["client_id"], form["scope"], form["grant_type"]),
                         ("projected-service-account-token", "client-1", "https://storage.azure.com/.default", "client_credentials"))

    def test_azure_without_credentials_names_the_ways_to_give_them(self):
        with self.assertRaises(PermissionError) as caught:
            AzureStore("ckpt", env={"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_BLOB_ENDPOINT": "http://127.0.0.1:9/acct"}).list("")
        self.assertIn("Azure Workload Identity", str(caught.exception))

    def test_gcs_refused_by_the_metadata_server_names_workload_identity(self):
        server = self.serve(lambda *request: (403, "text/plain", b"no Workload Identity binding"))
        with self.assertRaises(PermissionError) as caught:
            GCSStore("ckpt", env={"GCE_METADATA_HOST": server.host}).list("")
        self.assertIn("GKE Workload Identity", str(caught.exception))
        self.assertEqual(server.requests[0][2].get("Metadata-Flavor"), "Google")


if __name__ == "__main__":
    unittest.main()
