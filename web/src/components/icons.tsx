// A few line icons (24×24, currentColor), decorative: every control that
// shows one also has a text label or an aria-label.

import type { JSX } from "preact";

function Icon({ d, size = 18 }: { d: string; size?: number }): JSX.Element {
  return (
    <svg
      width={size}
      height={size}
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      stroke-width="1.8"
      stroke-linecap="round"
      stroke-linejoin="round"
      aria-hidden="true"
      focusable="false"
    >
      <path d={d} />
    </svg>
  );
}

export const ChatIcon = () => <Icon d="M21 12a8 8 0 0 1-11.6 7.1L4 20l1-4.6A8 8 0 1 1 21 12z" />;
export const CalendarIcon = () => <Icon d="M7 3v3M17 3v3M4 8h16M5 5h14a1 1 0 0 1 1 1v13a1 1 0 0 1-1 1H5a1 1 0 0 1-1-1V6a1 1 0 0 1 1-1z" />;
export const BoltIcon = () => <Icon d="M13 2 4 14h7l-1 8 9-12h-7l1-8z" />;
export const PlusIcon = () => <Icon d="M12 5v14M5 12h14" />;
export const SendIcon = () => <Icon d="M5 12h13M13 6l6 6-6 6" />;
export const StopIcon = () => <Icon d="M7 7h10v10H7z" />;
export const ImageIcon = () => <Icon d="M4 5h16v14H4zM4 16l5-5 4 4 3-3 4 4M15 9.5a1 1 0 1 0 0-.01" />;
export const CloseIcon = () => <Icon d="M6 6l12 12M18 6 6 18" size={14} />;
export const ToolIcon = () => <Icon d="M14.7 6.3a4 4 0 0 0-5.4 5.4L3 18l3 3 6.3-6.3a4 4 0 0 0 5.4-5.4l-2.6 2.6-2.4-.6-.6-2.4z" size={15} />;
export const SunIcon = () => <Icon d="M12 4V2M12 22v-2M4 12H2M22 12h-2M5.6 5.6 4.2 4.2M19.8 19.8l-1.4-1.4M5.6 18.4l-1.4 1.4M19.8 4.2l-1.4 1.4M12 16a4 4 0 1 0 0-8 4 4 0 0 0 0 8z" />;
export const MoonIcon = () => <Icon d="M20 14.5A8 8 0 0 1 9.5 4a8 8 0 1 0 10.5 10.5z" />;
export const LogoutIcon = () => <Icon d="M15 4h4v16h-4M10 8l-4 4 4 4M6 12h10" />;
export const PencilIcon = () => <Icon d="M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4" size={15} />;
export const TrashIcon = () => <Icon d="M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6" size={15} />;
export const ListIcon = () => <Icon d="M8 6h12M8 12h12M8 18h12M4 6h.01M4 12h.01M4 18h.01" />;
