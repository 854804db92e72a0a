// The request a plugin sees over a body kept in a file: read from the file when a step first
// asks, let go of once decoded (a 25 MB body is not held as bytes, text and payload at once),
// read back if asked again; its size and byte-order mark known without another read.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { bodyShape, hookRequest } from "../../src/plugin/hook-request.ts";
import { tempDir } from "../helpers/tmp.ts";

const enc = new TextEncoder();

function overFile(content: Uint8Array) {
  const path = join(tempDir(), "body");
  writeFileSync(path, content);
  const opened = { n: 0 };
  const req = hookRequest({
    method: "POST",
    url: "/hooks/x",
    headers: [],
    body: new Uint8Array(),
    bodyFile: {
      path: () => {
        opened.n++;
        return path;
      },
      size: content.length,
    },
    peer: "127.0.0.1",
    now: 0,
  });
  return { req, path, opened };
}

test("a kept body is read when first asked for, and its size is known before", () => {
  const body = enc.encode('{"a":1}');
  const { req, opened } = overFile(body);
  expect(bodyShape(req)).toMatchObject({ size: body.length, inFile: true });
  expect(opened.n).toBe(0);
  expect(req.body).toEqual(body);
  expect(req.body).toEqual(body);
  expect(opened.n).toBe(1);
});

test("once decoded the bytes are let go: asked again, they come from the file", () => {
  const { req, path, opened } = overFile(enc.encode('{"a":1}'));
  expect(req.body).toEqual(enc.encode('{"a":1}'));
  expect(req.json()).toEqual({ a: 1 });
  // The file changes under the request: only a request that holds no bytes sees it.
  writeFileSync(path, '{"a":2}');
  expect(req.body).toEqual(enc.encode('{"a":2}'));
  expect(opened.n).toBe(2);
  // The text and the payload stay as decoded.
  expect(req.text()).toBe('{"a":1}');
  expect(req.json()).toEqual({ a: 1 });
});

test("a byte-order mark is known after the text without reading the file again", () => {
  const { req, opened } = overFile(new Uint8Array([0xef, 0xbb, 0xbf, ...enc.encode("{}")]));
  expect(req.text()).toBe("{}");
  expect(bodyShape(req).bom()).toBe(true);
  expect(opened.n).toBe(1);
});

test("a body in memory is kept as it came, the same bytes after decoding", () => {
  const body = new Uint8Array([0xef, 0xbb, 0xbf, ...enc.encode('{"b":2}')]);
  const req = hookRequest({ method: "POST", url: "/", headers: [], body, peer: "127.0.0.1", now: 0 });
  expect(req.json()).toEqual({ b: 2 });
  expect(req.body).toBe(body);
  expect(bodyShape(req)).toMatchObject({ size: body.length, inFile: false });
  expect(bodyShape(req).bom()).toBe(true);
});
