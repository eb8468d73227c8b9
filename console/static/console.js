// toolgate console: the approver's key, made and kept in this browser (WebCrypto Ed25519,
// non-extractable, stored in IndexedDB), login and decisions signed with it, and live pages
// (Server-Sent Events). No build step. Text from the server is inserted only as HTML the server
// rendered with escaping on, or as textContent.
"use strict";

const DB = "toolgate-console";
const STORE = "keys";
const LOGIN_CONTEXT = "toolgate-console-login\n";

function b64url(bytes) {
  let text = "";
  new Uint8Array(bytes).forEach((b) => { text += String.fromCharCode(b); });
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function unb64url(text) {
  const plain = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4));
  return Uint8Array.from(plain, (c) => c.charCodeAt(0));
}

function say(text) {
  const status = document.getElementById("status");
  status.textContent = "";
  window.setTimeout(() => { status.textContent = text; }, 50);
}

function meta(name) {
  const found = document.querySelector(`meta[name="${name}"]`);
  return found ? found.content : "";
}

function database() {
  return new Promise((resolve, reject) => {
    const opening = indexedDB.open(DB, 1);
    opening.onupgradeneeded = () => opening.result.createObjectStore(STORE, { keyPath: "approver_id" });
    opening.onsuccess = () => resolve(opening.result);
    opening.onerror = () => reject(opening.error);
  });
}

async function keyStore(mode, work) {
  const db = await database();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, mode);
    const request = work(tx.objectStore(STORE));
    tx.oncomplete = () => resolve(request.result);
    tx.onerror = () => reject(tx.error);
  });
}

const saveKey = (entry) => keyStore("readwrite", (s) => s.put(entry));
const loadKey = (id) => keyStore("readonly", (s) => s.get(id));
const allKeys = () => keyStore("readonly", (s) => s.getAll());

async function post(path, body, withCsrf) {
  const headers = { "Content-Type": "application/json" };
  if (withCsrf) headers["X-CSRF-Token"] = meta("csrf-token");
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body), credentials: "same-origin" });
  const text = await response.text();
  if (!response.ok) throw new Error(text || response.statusText);
  return JSON.parse(text);
}

async function sign(privateKey, bytes) {
  return new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, privateKey, bytes));
}

async function logIn(approverId) {
  const entry = await loadKey(approverId);
  if (!entry) throw new Error(`no key for ${approverId} in this browser`);
  const { challenge } = await post("/login/challenge", {}, false);
  const message = new Uint8Array([
    ...new TextEncoder().encode(LOGIN_CONTEXT + window.location.origin + "\n"),
    ...unb64url(challenge),
  ]);
  const signature = b64url(await sign(entry.privateKey, message));
  await post("/login", { approver_id: approverId, challenge, signature }, false);
  window.location.assign("/");
}

async function loginPage() {
  const holder = document.getElementById("keys");
  const keys = await allKeys();
  holder.textContent = "";
  if (!keys.length) {
    const p = document.createElement("p");
    p.textContent = "This browser holds no approver key. Enrol from the invitation link an operator gave you.";
    holder.append(p);
    return;
  }
  for (const entry of keys) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "login";
    button.dataset.approverId = entry.approver_id;
    button.textContent = `Log in as ${entry.approver_id}`;
    button.addEventListener("click", () => logIn(entry.approver_id).catch((e) => say(`Login refused: ${e.message}`)));
    holder.append(button);
  }
  holder.querySelector("button").focus();
}

async function enrolPage() {
  const token = window.location.hash.slice(1);
  const text = document.getElementById("invitation-text");
  const button = document.getElementById("enrol");
  if (!token) { text.textContent = "This link holds no invitation."; return; }
  try {
    const about = await post("/enrol/check", { token }, false);
    text.textContent = `For ${about.approver_id}: tenants ${about.tenants.join(", ")}; groups ${about.groups.join(", ") || "none"}.`;
  } catch (e) {
    text.textContent = `Refused: ${e.message}`;
    return;
  }
  button.disabled = false;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
      const publicKey = b64url(await crypto.subtle.exportKey("raw", pair.publicKey));
      const { approver_id } = await post("/enrol", { token, public_key: publicKey }, false);
      await saveKey({ approver_id, privateKey: pair.privateKey, publicKey: pair.publicKey });
      history.replaceState(null, "", "/enrol");
      say(`Enrolled as ${approver_id}; logging in`);
      await logIn(approver_id);
    } catch (e) {
      text.textContent = `Refused: ${e.message}`;
    }
  });
}

async function refresh(section) {
  const body = section.querySelector("[id$='-body']");
  const response = await fetch(section.dataset.fragment, { credentials: "same-origin", headers: { Accept: "application/x-toolgate-fragment" } });
  if (response.status === 401) { window.location.assign("/login"); return; }
  if (!response.ok) return;
  const focused = document.activeElement && document.activeElement.id;
  const reason = document.getElementById("deny-reason");
  const typed = reason ? reason.value : "";
  body.innerHTML = await response.text(); // rendered by the server, every value escaped
  const again = document.getElementById("deny-reason");
  if (again) again.value = typed;
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
  tick();
}

function live() {
  const section = document.querySelector("[data-fragment]");
  if (!section) return;
  const events = new EventSource("/events");
  events.addEventListener("approval", async (event) => {
    const mine = section.dataset.approvalId;
    if (mine && mine !== event.data) return;
    await refresh(section);
    if (mine) {
      const status = document.getElementById("card-status");
      const votes = document.getElementById("votes");
      say(`Approval updated: ${status ? status.textContent : ""}. Votes: ${votes ? votes.textContent.trim() : ""}`);
    } else {
      const caption = section.querySelector("caption");
      say(caption ? `Inbox updated: ${caption.textContent}` : "Inbox updated: nothing is waiting");
    }
  });
}

function tick() {
  const now = Date.now();
  document.querySelectorAll("[data-expires-at-ms]").forEach((el) => {
    const left = Math.round((Number(el.dataset.expiresAtMs) - now) / 1000);
    if (left <= 0) { el.textContent = "(expired)"; return; }
    const m = Math.floor(left / 60), s = left % 60;
    el.textContent = `(in ${m ? `${m} min ` : ""}${s} s)`;
  });
}

function matches(document_, bytes, verdict) {
  const signed = JSON.parse(new TextDecoder().decode(bytes));
  const card = document.getElementById("card");
  const hash = document.querySelector("[data-payload-hash]").dataset.payloadHash;
  return signed.approval_id === card.dataset.approvalId && signed.decision === verdict &&
    signed.approver_id === meta("approver-id") && signed.payload_hash === hash &&
    document_.decision_id === signed.decision_id;
}

async function decide(form) {
  const approvalId = document.getElementById("card").dataset.approvalId;
  const verdict = form.dataset.verdict;
  const reason = verdict === "DENY" ? form.querySelector("textarea").value.trim() : "";
  if (verdict === "DENY" && !reason) { say("A denial needs a reason."); form.querySelector("textarea").focus(); return; }
  const entry = await loadKey(meta("approver-id"));
  if (!entry) { say("This browser holds no key for you: nothing was signed."); return; }
  const base = `/approvals/${encodeURIComponent(approvalId)}`;
  const prepared = await post(`${base}/prepare`, { verdict, reason }, true);
  const bytes = unb64url(prepared.signed_bytes);
  if (!matches(prepared.document, bytes, verdict)) { say("The decision offered is not this card's: nothing was signed."); return; }
  const signature = b64url(await sign(entry.privateKey, bytes));
  await post(`${base}/decide`, { document: prepared.document, signature }, true);
  say(`Your ${verdict === "APPROVE" ? "approval" : "denial"} is signed and sent; waiting for it to be counted.`);
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.classList || !form.classList.contains("decision")) return;
  event.preventDefault();
  form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  decide(form).catch((e) => say(`Refused: ${e.message}`)).finally(() => {
    form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
  });
});

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "login") loginPage().catch((e) => say(e.message));
  if (page === "enrol") {
    window.addEventListener("hashchange", () => window.location.reload()); // another invitation pasted
    enrolPage().catch((e) => say(e.message));
  }
  if (page === "inbox" || page === "card") { live(); tick(); window.setInterval(tick, 1000); }
});
