// `tj ui` in a second browser engine: Debian's Firefox ESR, driven over WebDriver BiDi by Puppeteer's core.
//
//   node tests/browser/ui_firefox.mjs PLAN.json     (tests/integration/test_ui_firefox.py writes the plan)
//
// The plan: {"loginUrl": "...#token=...", "checks": [{"hash": "#/jobs/ns/name", "testid": "spec", "text": "..."}]}.
// Signs in, visits each page by its hash, waits until the element with that data-testid shows the text, and prints
// one JSON line: the browser's version, the dialogs the page opened (dismissed at once), the flag a payload's script
// would set, how many elements of a payload were parsed into the DOM, the CSP violations reported, and each check's
// outcome. The judgement is the Python test's; this only looks. The page's own CSP stays on (Firefox's BiDi has no
// bypass): markup parsed into the DOM is counted whether or not the CSP then stops its script.
import fs from "node:fs";
import puppeteer from "puppeteer-core";

const WATCH = `
window.__pwned = 0;
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective));
`;
const TIMEOUT_MS = Number(process.env.TJ_UI_TIMEOUT_MS || 30000);

async function shows(page, testid, text) {
  try {
    await page.waitForFunction(
      (id, wanted) => (document.querySelector(`[data-testid="${id}"]`)?.textContent || "").includes(wanted),
      { timeout: TIMEOUT_MS, polling: 200 }, testid, text);
    return { shown: true };
  } catch (error) {
    const actual = await page.evaluate((id) => document.querySelector(`[data-testid="${id}"]`)?.textContent ?? null, testid);
    return { shown: false, actual: actual === null ? null : actual.slice(0, 400), error: String(error).slice(0, 200) };
  }
}

const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const browser = await puppeteer.launch({
  browser: "firefox",
  executablePath: process.env.TJ_FIREFOX || "/usr/bin/firefox-esr",
  headless: true,
});
try {
  const page = await browser.newPage();
  const dialogs = [];
  page.on("dialog", async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss(); });
  await page.evaluateOnNewDocument(WATCH);
  await page.goto(plan.loginUrl);
  const signedIn = await shows(page, "identity", "acting as");
  const checks = [];
  for (const check of plan.checks) {
    await page.evaluate((hash) => { location.hash = hash; }, check.hash);
    checks.push({ ...check, ...(await shows(page, check.testid, check.text)) });
  }
  const parsed = await page.evaluate(() => document.querySelectorAll("[data-pwned], img, script:not([src])").length);
  const pwned = await page.evaluate(() => window.__pwned);
  const violations = await page.evaluate(() => window.__violations);
  console.log(JSON.stringify({ version: await browser.version(), signedIn, checks, dialogs, pwned, parsed, violations }));
} finally {
  await browser.close();
}
