import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";

/** `sdks/typescript`, from `dist/test/`. */
export const SDK_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The repository root. */
export const REPO_DIR = process.env["CHARGEONCE_REPO"] ?? resolve(SDK_DIR, "..", "..");
/** The server binary. */
export const CHARGEONCE_BIN = process.env["CHARGEONCE_BIN"] ?? resolve(REPO_DIR, "target", "debug", "chargeonce");
