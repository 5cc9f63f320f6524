// Things that run: timer (and workouts), games (tic-tac-toe, memory, snake), and the music
// drafts as far as the spec goes (settings shown; a metronome that ticks).
import { h, list, num, put, str } from "./dom.js";
import { sending } from "./send.js";

const ARRIVAL_MS = 60_000; // a reply this new has just arrived

function clock(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  const hh = Math.floor(s / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return hh ? `${hh}:${String(mm).padStart(2, "0")}:${ss}` : `${mm}:${ss}`;
}

function timer(node, ctx) {
  const p = node.props;
  const work = num(p.work, 60);
  const rest = num(p.rest, 0);
  const rounds = Math.max(1, num(p.rounds, 1));
  const workout = p.rounds !== undefined || rest > 0;
  const box = h("section", { class: `yl-card yl-timer ${workout ? "yl-workout" : ""}`, "aria-label": str(p.label) || "Timer" });
  if (p.label) put(box, h("h3", { class: "yl-title" }, str(p.label)));
  const face = h("p", { class: "yl-clock", role: "timer", "aria-live": "off" });
  const phase = h("p", { class: "yl-sub", "aria-live": "polite" });
  put(box, face, phase);
  // State: which round, which phase, how long is left; one interval while running.
  let round = 1;
  let resting = false;
  let left = work;
  let up = 0;
  let tick = null;
  let finished = false;
  const show = () => {
    face.textContent = p.up ? clock(up) : clock(left);
    phase.textContent = p.up ? "Stopwatch" : workout ? `${resting ? "Rest" : "Work"} · round ${round} of ${rounds}` : "";
  };
  const stop = () => {
    clearInterval(tick);
    tick = null;
    start.textContent = "Start";
    start.setAttribute("aria-pressed", "false");
  };
  const finish = () => {
    stop();
    finished = true;
    box.classList.add("yl-ticked");
    phase.textContent = "Done";
    sending(start, box, () => ctx.send(node.id, "timer", { done: true, rounds }));
  };
  const step = () => {
    if (p.up) {
      up += 1;
      return show();
    }
    left -= 1;
    if (left > 0) return show();
    if (!resting && rest > 0 && round <= rounds) {
      resting = true;
      left = rest;
    } else if (round < rounds) {
      round += 1;
      resting = false;
      left = work;
    } else return finish();
    show();
  };
  const start = h("button", { type: "button", class: "yl-primary", "aria-pressed": "false" }, "Start");
  const reset = h("button", { type: "button", class: "yl-option" }, "Reset");
  // Starting is a quiet event: it stays on the page.
  start.addEventListener("click", () => {
    if (tick) return stop();
    if (finished) return;
    tick = setInterval(step, 1000);
    start.textContent = "Pause";
    start.setAttribute("aria-pressed", "true");
  });
  reset.addEventListener("click", () => {
    stop();
    [round, resting, left, up, finished] = [1, false, work, 0, false];
    box.classList.remove("yl-ticked");
    show();
  });
  put(box, h("div", { class: "yl-actions" }, start, reset));
  show();
  // `+auto` starts a timer as it arrives: not again when the thread is read back later.
  const arrived = Date.now() - Date.parse(ctx.row.created_at || "") < ARRIVAL_MS;
  if (p.auto && arrived) start.click();
  return box;
}

// --- games -----------------------------------------------------------------------------------

const LINES = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 4, 7], [2, 5, 8], [3, 6, 9], [1, 5, 9], [3, 5, 7]];

function winner(x, o) {
  for (const [mark, cells] of [["x", x], ["o", o]]) if (LINES.some((line) => line.every((c) => cells.includes(c)))) return mark;
  return x.length + o.length === 9 ? "draw" : null;
}

function tictactoe(node, ctx, box) {
  const p = node.props;
  const you = p.you === "o" ? "o" : "x";
  const x = list(p.x).map(Number);
  const o = list(p.o).map(Number);
  const grid = h("div", { class: "yl-ttt", role: "grid", "aria-label": "Tic-tac-toe" });
  const status = h("p", { class: "yl-sub", "aria-live": "polite" });
  const mine = you === "x" ? x : o;
  const draw = () => {
    const w = winner(x, o);
    const myTurn = !w && (you === "x" ? x.length <= o.length : o.length < x.length);
    grid.replaceChildren(
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((c) => {
        const mark = x.includes(c) ? "X" : o.includes(c) ? "O" : "";
        const label = `Cell ${c}, ${mark || "empty"}`;
        const cell = h("button", { type: "button", class: "yl-cell", "aria-label": label, disabled: Boolean(mark) || !myTurn }, mark);
        cell.addEventListener("click", () => {
          mine.push(c);
          const after = winner(x, o);
          const value = { kind: "tictactoe", move: c, x: [...x], o: [...o], ...(after ? { winner: after } : {}) };
          draw();
          sending(null, box, () => ctx.send(node.id, "game", value));
        });
        return cell;
      }),
    );
    status.textContent = w ? (w === "draw" ? "A draw." : w === you ? "You win!" : "You lose.") : myTurn ? "Your move." : "Waiting for the agent…";
  };
  draw();
  return [grid, status];
}

function memory(node, ctx, box) {
  const pairs = Math.max(2, Math.min(12, num(node.props.pairs, 6)));
  const items = list(node.props.items).map(str);
  const fruit = ["🍎", "🍋", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥", "🍉", "🍐", "🍊", "🫐"];
  const faces = Array.from({ length: pairs }, (_, i) => items[i] || fruit[i]);
  const deck = [...faces, ...faces].map((f, i) => ({ f, i })).sort(() => Math.random() - 0.5);
  const grid = h("div", { class: "yl-memory", role: "grid", "aria-label": "Memory" });
  const status = h("p", { class: "yl-sub", "aria-live": "polite" }, "Find the pairs.");
  let open = [];
  let moves = 0;
  let found = 0;
  const started = Date.now();
  const cells = deck.map((card) => {
    const cell = h("button", { type: "button", class: "yl-cell", "aria-label": "Hidden card" }, "");
    cell.addEventListener("click", () => {
      if (open.length === 2 || cell.classList.contains("yl-open")) return;
      cell.classList.add("yl-open");
      cell.textContent = card.f;
      cell.setAttribute("aria-label", card.f);
      open.push([cell, card]);
      if (open.length < 2) return;
      moves += 1;
      const [[c1, a], [c2, b]] = open;
      if (a.f === b.f) {
        found += 1;
        open = [];
        if (found === pairs) {
          const seconds = Math.round((Date.now() - started) / 1000);
          status.textContent = `All pairs in ${moves} moves.`;
          sending(null, box, () => ctx.send(node.id, "game", { kind: "memory", over: true, moves, seconds }));
        }
      } else {
        setTimeout(() => {
          for (const c of [c1, c2]) {
            c.classList.remove("yl-open");
            c.textContent = "";
            c.setAttribute("aria-label", "Hidden card");
          }
          open = [];
        }, 700);
      }
    });
    return cell;
  });
  put(grid, ...cells);
  return [grid, status];
}

function snake(node, ctx, box) {
  const size = Math.max(10, Math.min(20, num(node.props.size, 15)));
  const speed = Math.max(1, Math.min(5, num(node.props.speed, 2)));
  const canvas = h("canvas", { width: size * 12, height: size * 12, class: "yl-snake", tabindex: 0, role: "img", "aria-label": "Snake: arrow keys steer" });
  const status = h("p", { class: "yl-sub", "aria-live": "polite" }, `Best ${num(node.props.best, 0)}. Press Start, steer with the arrow keys.`);
  const start = h("button", { type: "button", class: "yl-primary" }, "Start");
  let timer = null;
  start.addEventListener("click", () => {
    if (timer) return;
    let body = [[5, 5]];
    let dir = [1, 0];
    let food = [9, 9];
    let score = 0;
    canvas.focus();
    canvas.onkeydown = (e) => {
      const turn = { ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] }[e.key];
      if (turn && (turn[0] !== -dir[0] || turn[1] !== -dir[1])) {
        dir = turn;
        e.preventDefault();
      }
    };
    const g = canvas.getContext("2d");
    timer = setInterval(() => {
      const headAt = [body[0][0] + dir[0], body[0][1] + dir[1]];
      const hit = headAt.some((v) => v < 0 || v >= size) || body.some(([a, b]) => a === headAt[0] && b === headAt[1]);
      if (hit) {
        clearInterval(timer);
        timer = null;
        status.textContent = `Game over: ${score}.`;
        sending(start, box, () => ctx.send(node.id, "game", { kind: "snake", over: true, score }));
        return;
      }
      body.unshift(headAt);
      if (headAt[0] === food[0] && headAt[1] === food[1]) {
        score += 1;
        food = [Math.floor(Math.random() * size), Math.floor(Math.random() * size)];
      } else body.pop();
      g.clearRect(0, 0, canvas.width, canvas.height);
      g.fillStyle = getComputedStyle(canvas).color;
      for (const [a, b] of body) g.fillRect(a * 12, b * 12, 11, 11);
      g.fillStyle = "#e4572e";
      g.fillRect(food[0] * 12, food[1] * 12, 11, 11);
      status.textContent = `Score ${score}`;
    }, 400 / speed);
  });
  return [canvas, status, h("div", { class: "yl-actions" }, start)];
}

const GAMES = { tictactoe, memory, snake };

function game(node, ctx) {
  const kind = String(node.props.kind || "").toLowerCase();
  const box = h("section", { class: "yl-card yl-game" });
  put(box, h("h3", { class: "yl-title" }, str(node.props.title) || { tictactoe: "Tic-tac-toe", memory: "Memory", snake: "Snake" }[kind] || "A game"));
  if (!GAMES[kind]) {
    put(box, h("p", { class: "yl-sub" }, `There's a ${kind || "game"} game here that this page can't play yet.`));
    return box;
  }
  put(box, ...GAMES[kind](node, ctx, box));
  return box;
}

// --- music drafts: what the agent set, and a metronome that ticks -------------------------

function music(node) {
  const p = node.props;
  const name = node.preset[0].toUpperCase() + node.preset.slice(1);
  const box = h("section", { class: "yl-card yl-music" }, h("h3", { class: "yl-title" }, name));
  const facts = Object.entries(p).filter(([, v]) => typeof v !== "object" || Array.isArray(v));
  if (facts.length) put(box, h("dl", { class: "yl-facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, str(v))])));
  if (node.preset === "metronome" || node.preset === "loop") {
    const bpm = Math.max(20, Math.min(300, num(p.bpm, 90)));
    const dot = h("span", { class: "yl-beat", "aria-hidden": "true" });
    const go = h("button", { type: "button", class: "yl-option", "aria-pressed": "false" }, `Start ${bpm} bpm`);
    let tick = null;
    go.addEventListener("click", () => {
      if (tick) {
        clearInterval(tick);
        tick = null;
      } else tick = setInterval(() => dot.classList.toggle("yl-on"), 60000 / bpm);
      go.setAttribute("aria-pressed", String(Boolean(tick)));
      go.textContent = `${tick ? "Stop" : "Start"} ${bpm} bpm`;
    });
    put(box, h("div", { class: "yl-actions" }, go, dot));
  }
  return box;
}

export const PLAY = { timer, game, loop: music, drums: music, keys: music, chords: music, tuner: music, metronome: music };
