/// <reference types="vitest/config" />
import { defineConfig } from "vite";

// `npm run dev` serves the app with hot reload and sends every API call to a
// running `agwire serve` (AGWIRE_URL, default http://127.0.0.1:8080).
const target = process.env.AGWIRE_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  server: {
    proxy: {
      "/api": { target, changeOrigin: true },
      "/healthz": { target, changeOrigin: true },
    },
  },
  build: {
    // The bundle is committed and compared byte for byte with a fresh build
    // (scripts/check-dist.mjs): no source maps (they carry paths), no
    // preload polyfill (every browser we target has modulepreload).
    sourcemap: false,
    modulePreload: { polyfill: false },
    target: "es2022",
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  test: {
    include: ["src/**/*.test.ts"],
  },
});
