// An approver in a real browser, for cordon's tests: opens the approvals
// page in headless Chromium (Debian's), waits for a held call, fills in the
// approver's name and reason, clicks the button and prints what the page
// then says.
//
//   node web.mjs URL NAME REASON approve|deny
import { chromium } from "playwright-core";

const [url, name, reason, decision] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage();
  for (let i = 0; ; i++) {
    await page.goto(url);
    if (await page.locator(".req").count() > 0) break;
    if (i > 100) throw new Error("no held call appeared on the page");
    await page.waitForTimeout(200);
  }
  const req = page.locator(".req").first();
  console.log("shown: " + (await req.locator("h2").innerText()).replace(/\s+/g, " "));
  console.log("arguments: " + (await req.locator("pre").innerText()).replace(/\s+/g, " "));
  await req.locator('input[name="by"]').fill(name);
  await req.locator('input[name="reason"]').fill(reason);
  await req.locator(`button[value="${decision}"]`).click();
  await page.waitForSelector("#note");
  console.log("page: " + (await page.locator("#note").innerText()));
} finally {
  await browser.close();
}
