// An approver in a real browser, for cordon's tests: opens the approvals
// page in headless Chromium (Debian's), signs in with the approver's token,
// waits for a held call, fills in the reason, clicks the button and prints
// what the page then says.
//
//   node web.mjs URL TOKEN REASON approve|deny
import { chromium } from "playwright-core";

const [url, token, reason, decision] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  await page.locator('input[name="token"]').fill(token);
  await page.locator("form button").click();
  await page.waitForSelector("#approver");
  console.log("signed in as: " + (await page.locator("#approver").innerText()));
  for (let i = 0; ; i++) {
    await page.goto(url);
    if (await page.locator(".req").count() > 0) break;
    if (i > 100) throw new Error("no held call appeared on the page");
    await page.waitForTimeout(200);
  }
  const req = page.locator(".req").first();
  console.log("shown: " + (await req.locator("h2").innerText()).replace(/\s+/g, " "));
  console.log("arguments: " + (await req.locator("pre").innerText()).replace(/\s+/g, " "));
  await req.locator('input[name="reason"]').fill(reason);
  await req.locator(`button[value="${decision}"]`).click();
  await page.waitForSelector("#note");
  console.log("page: " + (await page.locator("#note").innerText()));
} finally {
  await browser.close();
}
