// Jobs of the user domain, declared as an `as const` object rather than an enum.
export const UserJobType = {
  SEND_WELCOME_EMAIL: 'users.send_welcome_email',
} as const;

export interface ISendWelcomeEmailPayload {
  userId: string;
  email: string;
}
