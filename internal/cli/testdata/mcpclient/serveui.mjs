// An admin in a real browser, for cordon's tests: signs in to cordon
// serve's page with the admin token, finds a sandbox and its session,
// opens its audit review, and approves a pending request; prints what the
// page shows at each step.
//
//   node serveui.mjs URL TOKEN SANDBOX APPROVAL
import { chromium } from "playwright-core";

const [url, token, sandbox, approval] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const flat = (s) => s.replace(/\s+/g, " ").trim();
try {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.goto(url);
  await page.fill("#token", token);
  await page.click("#login button");
  const row = page.locator(`tr.sandbox[data-id="${sandbox}"]`);
  await row.waitFor({ timeout: 15000 });
  console.log("sandbox: " + flat(await row.innerText()));
  await row.click();
  const step = page.locator(".step", { has: page.locator("pre.argv") }).first();
  await step.waitFor({ timeout: 15000 });
  console.log("did: " + flat(await step.locator(".did").innerText()));
  console.log("saw: " + flat(await step.locator(".saw").innerText()));
  console.log("markup from the sandbox became elements: " + (await page.locator("#steps img").count()));
  const req = page.locator(`.approval[data-id="${approval}"]`);
  await req.waitFor({ timeout: 15000 });
  console.log("approval: " + flat(await req.locator("h3").innerText()));
  await req.locator('input[name="reason"]').fill("checked the invoice");
  await req.locator("button.approve").click();
  await page.waitForSelector(".note", { timeout: 15000 });
  console.log("page: " + flat(await page.locator(".note").first().innerText()));
  for (const p of problems) console.log(p);
} finally {
  await browser.close();
}
