import { describe, expect, it } from "vitest";
import { dirOf, format, langOf, pickLang } from "./i18n";

describe("the message table", () => {
  it("fills placeholders, in each language", () => {
    expect(format("en", "composer.remove", { name: "a.png" })).toBe("Remove a.png");
    expect(format("zh-CN", "composer.remove", { name: "a.png" })).toBe("移除 a.png");
    expect(format("en", "composer.tooMany", { n: 3 })).toBe("At most 3 images per message.");
    // A placeholder nobody filled stays visible rather than vanishing.
    expect(format("en", "composer.remove")).toBe("Remove {name}");
  });

  it("picks the first of the browser's languages it has", () => {
    expect(pickLang(["zh-TW", "en-US"])).toBe("zh-CN");
    expect(pickLang(["fr-FR", "en-GB", "zh-CN"])).toBe("en");
    expect(pickLang(["fr-FR", "de"])).toBe("en");
    expect(pickLang([])).toBe("en");
    expect(langOf("zh_Hans_CN")).toBe("zh-CN");
    expect(langOf("ja")).toBeNull();
  });

  it("writes Arabic, Hebrew, Persian and Urdu right to left", () => {
    for (const tag of ["ar", "ar-EG", "he-IL", "fa", "ur-PK"]) expect(dirOf(tag)).toBe("rtl");
    for (const tag of ["en", "zh-CN", "arn", "hr"]) expect(dirOf(tag)).toBe("ltr");
  });
});
