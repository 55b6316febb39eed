import { render } from "preact";
import { App } from "./components/App";
import { applyLang, lang } from "./i18n";
import { applyTheme, storedTheme } from "./tools";
import "./styles.css";

applyTheme(storedTheme());
applyLang(lang(), false);
const root = document.getElementById("app");
if (root) render(<App />, root);
