// The senses page: each sensor's events a minute drawn by uPlot with a time axis and a
// count scale, silence and start, the urgency-rule tester; times in the person's zone.
"use strict";

const senses = {
  async act(url, data, button) {
    button.disabled = true;
    const {status, body} = await noema.post(url, data);
    button.disabled = false;
    const box = document.getElementById("outcome");
    box.hidden = false;
    box.className = status === 200 ? "card" : "card error";
    box.textContent = status === 200 ? body.text : (body.error || "that did not work");
    if (status === 200) {
      const row = button.closest("tr");
      row.querySelector(".state").textContent = url.endsWith("silence") ? "silenced" : "active";
    }
  },

  clock(seconds) {
    return noema.clock(seconds);
  },

  // A scale whose top leaves room above the highest bar for the marks.
  top(peak) {
    return Math.max(2, Math.ceil(Math.max(peak, 1) * 1.4));
  },

  // Triangles for deliveries (pointing up, first row) and cancellations (pointing down,
  // second row), kept whole inside the plotting area: a mark at an edge moves in, never cut.
  marks(plot) {
    const ratio = window.devicePixelRatio || 1;
    const half = 5 * ratio;
    const rows = [
      {times: plot.deliveries, colour: "#116329", up: true, y: half + 2 * ratio},
      {times: plot.cancellations, colour: "#9b1c1c", up: false, y: 3 * half + 5 * ratio},
    ];
    return (u) => {
      const {left, top, width} = u.bbox;
      const ctx = u.ctx;
      ctx.save();
      ctx.font = `${11 * ratio}px system-ui, sans-serif`;
      ctx.textBaseline = "middle";
      for (const row of rows) {
        ctx.fillStyle = row.colour;
        // Marks closer than a mark's width are one mark with their number beside
        // it: drawn apart they would lie on each other and look like one.
        const groups = [];
        for (const ts of [...row.times].sort((a, b) => a - b)) {
          if (ts < plot.start || ts > plot.end) continue;
          const x = Math.min(Math.max(u.valToPos(ts, "x", true), left + half), left + width - half);
          const last = groups[groups.length - 1];
          if (last && x - last.x < 2 * half) last.count += 1;
          else groups.push({x, count: 1});
        }
        for (const {x, count} of groups) {
          const y = top + row.y;
          ctx.beginPath();
          if (row.up) {
            ctx.moveTo(x, y - half); ctx.lineTo(x + half, y + half); ctx.lineTo(x - half, y + half);
          } else {
            ctx.moveTo(x, y + half); ctx.lineTo(x + half, y - half); ctx.lineTo(x - half, y - half);
          }
          ctx.closePath();
          ctx.fill();
          if (count > 1) {
            const label = `×${count}`;
            const beside = x + half + 2 * ratio + ctx.measureText(label).width > left + width;
            ctx.textAlign = beside ? "right" : "left";
            ctx.fillText(label, beside ? x - half - 2 * ratio : x + half + 2 * ratio, y);
          }
        }
      }
      ctx.restore();
    };
  },

  // The legend under a plot, in words and figures: the hour's totals, or the
  // minute under the pointer.
  legend(figure, plot, series) {
    const line = noema.el("p", "legend");
    line.setAttribute("aria-live", "polite");
    figure.appendChild(line);
    const busiest = series.counts.indexOf(Math.max(...series.counts));
    const inHour = (times) => times.filter((ts) => ts >= plot.start && ts <= plot.end).length;
    const hour = `${series.total} event${series.total === 1 ? "" : "s"} this hour` +
      (series.peak ? ` · busiest minute ${senses.clock(plot.times[busiest])} (${series.peak})` : "") +
      ` · ▲ ${inHour(plot.deliveries)} delivered · ▼ ${inHour(plot.cancellations)} cancelled`;
    line.textContent = hour;
    return (u) => {
      const at = u.cursor.idx;
      if (at == null) {
        line.textContent = hour;
        return;
      }
      const n = series.counts[at] || 0;
      line.textContent = `${senses.clock(plot.times[at])}: ${n} event${n === 1 ? "" : "s"}`;
    };
  },

  chart(figure, plot, series) {
    const box = figure.querySelector(".chart");
    const ticks = {x: [], y: []};
    const record = (name, format) => (u, splits) => {
      const shown = splits.map(format);
      ticks[name] = shown;
      return shown;
    };
    const size = () => ({width: Math.max(box.clientWidth, 200),
                         height: window.innerWidth < 640 ? 150 : 170});
    const options = {
      ...size(),
      scales: {
        x: {time: true, range: () => [plot.start, plot.end]},
        y: {range: () => [0, senses.top(series.peak)]},
      },
      series: [
        {label: "minute", value: (u, v) => (v == null ? "—" : senses.clock(v))},
        {label: "events", stroke: "#2457c5", fill: "rgba(36, 87, 197, 0.55)", width: 1,
         paths: uPlot.paths.bars({size: [0.85, 40], align: 1}), points: {show: false},
         value: (u, v) => (v == null ? "—" : String(v))},
      ],
      axes: [
        {values: record("x", senses.clock), space: 70},
        {values: record("y", (v) => String(v)), incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000,
         2000, 5000, 10000], space: 18, label: "events a minute", labelSize: 22, size: 44},
      ],
      legend: {show: false},
      cursor: {drag: {x: false, y: false}, points: {show: false}},
      hooks: {
        setCursor: [senses.legend(figure, plot, series)],
        draw: [senses.marks(plot), () => {
          figure.dataset.xTicks = ticks.x.join(" | ");
          figure.dataset.yTicks = ticks.y.join(" | ");
        }],
      },
    };
    // An empty minute has no bar at all, not a bar of height zero.
    const counts = series.counts.map((n) => (n ? n : null));
    const chart = new uPlot(options, [plot.times, counts], box);
    window.addEventListener("resize", () => chart.setSize(size()));
    return chart;
  },

  async testRule(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const data = {};
    for (const name of ["channel", "sender", "key", "text"]) data[name] = form.elements[name].value;
    data.authorised = form.elements.authorised.checked;
    const {status, body} = await noema.post("/api/senses/rule", data);
    const out = document.getElementById("rule-outcome");
    out.className = status === 200 ? "outcome" : "outcome error";
    out.textContent = status === 200 ? body.text : (body.error || "the test failed");
  },
};

document.addEventListener("DOMContentLoaded", () => {
  for (const node of document.querySelectorAll("time.until")) {
    node.textContent = noema.when(Number(node.dataset.ts));
  }
  for (const button of document.querySelectorAll("button.silence")) {
    button.addEventListener("click", () => senses.act("/api/senses/silence", {
      channel: button.dataset.channel,
      duration: button.closest("td").querySelector("select").value,
    }, button));
  }
  for (const button of document.querySelectorAll("button.start")) {
    button.addEventListener("click", () => senses.act("/api/senses/start",
      {channel: button.dataset.channel}, button));
  }
  const rule = document.getElementById("rule-test");
  if (rule) rule.addEventListener("submit", senses.testRule);
  const source = document.getElementById("plot-data");
  if (source && typeof uPlot === "function") {
    const plot = JSON.parse(source.textContent);
    for (const series of plot.channels) {
      const figure = document.querySelector(`figure.plot[data-channel="${CSS.escape(series.channel)}"]`);
      if (figure) senses.chart(figure, plot, series);
    }
  }
});
