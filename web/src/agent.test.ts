import { describe, expect, it } from "vitest";
import { runsUrl } from "./agent";

describe("the run endpoint", () => {
  it("names the multitask strategy when there is one, else leaves it to the server", () => {
    expect(runsUrl()).toBe("/api/v1/agent/runs");
    expect(runsUrl("interrupt")).toBe("/api/v1/agent/runs?multitask_strategy=interrupt");
    expect(runsUrl("enqueue")).toBe("/api/v1/agent/runs?multitask_strategy=enqueue");
    expect(runsUrl("rollback")).toBe("/api/v1/agent/runs?multitask_strategy=rollback");
    expect(runsUrl("reject")).toBe("/api/v1/agent/runs?multitask_strategy=reject");
  });
});
