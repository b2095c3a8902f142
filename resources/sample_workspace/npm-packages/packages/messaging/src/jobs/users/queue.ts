export enum UsersQueue {
  USERS = 'user-queue',
}
